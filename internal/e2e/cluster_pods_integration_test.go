//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// testDeploymentDockerMode: a Deployment created with kubectl runs on the node
// in docker mode, and deleting it removes the pods gracefully.
func testDeploymentDockerMode(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.start()
	checkDeployment(t, n)
	checkClusterMetrics(t, n)
}

// testDeploymentRemoteMode: the same with the kubelet in remote mode on a
// shim-only instance of the binary (as in TestIntegrationRemoteModeShim).
func testDeploymentRemoteMode(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.useShimOnly()
	n.start()
	checkDeployment(t, n)
	checkClusterMetrics(t, n)
}

// checkClusterMetrics checks /metrics (on the local socket) of a node that
// ran pods of the API against upstream's names, types, labels and help texts.
func checkClusterMetrics(t *testing.T, n *clusterNode) {
	t.Helper()
	body, code, err := n.get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	checkUpstreamMetrics(t, body, true)
}

// checkDeployment creates `kubectl create deployment web --replicas=3` of the
// local busybox image under its :local tag (the API defaults imagePullPolicy
// to IfNotPresent: nothing is pulled; only the grace period is shortened) and
// waits until its 3 pods run on the node with IPs of the node's subnet, the
// Deployment reports them available, and the runtime holds their containers.
// Then it deletes the Deployment and waits until the pods are gone from the API
// and the runtime and their IPs are released.
func checkDeployment(t *testing.T, n *clusterNode) {
	n.createNamespace()
	n.waitNodeReady(60 * time.Second)
	out := n.kubectl("", "-n", n.ns, "create", "deployment", "web", "--image="+localImage, "--replicas=3",
		"--dry-run=client", "-o", "json", "--", "sleep", "3600")
	var d appsv1.Deployment
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("decode the deployment of kubectl create --dry-run: %v\n%s", err, out)
	}
	grace := int64(2)
	d.Spec.Template.Spec.TerminationGracePeriodSeconds = &grace
	body, err := json.Marshal(&d)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	n.kubectl(string(body), "create", "-f", "-")

	ctx := context.Background()
	var pods []v1.Pod
	n.poll(2*time.Minute, "deployment web: 3 pods running on the node and available", func() (bool, string) {
		dep, err := n.c.Client.AppsV1().Deployments(n.ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		list, err := n.c.Client.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		pods = list.Items
		running := 0
		for i := range pods {
			if pods[i].Spec.NodeName == n.name && runningAndReady(&pods[i]) {
				running++
			}
		}
		state := fmt.Sprintf("available %d, %d of %d pods running here:\n%s", dep.Status.AvailableReplicas, running, len(pods), podsJSON(pods))
		return dep.Status.AvailableReplicas == 3 && running == 3 && len(pods) == 3, state
	})
	t.Logf("3 replicas running and available %s after kubectl create", time.Since(start).Round(time.Millisecond))

	var ips, uids []string
	for i := range pods {
		p := &pods[i]
		ip := p.Status.PodIP
		if !strings.HasPrefix(ip, n.subnet+".") || p.Status.HostIP != "127.0.0.1" || p.Status.StartTime == nil {
			t.Errorf("pod %s: podIP %q (subnet %s.0/24), hostIP %q, startTime %v", p.Name, ip, n.subnet, p.Status.HostIP, p.Status.StartTime)
		}
		cs := containerStatus(p, d.Spec.Template.Spec.Containers[0].Name)
		if cs == nil || cs.ContainerID == "" || cs.ImageID == "" || cs.Started == nil || !*cs.Started {
			t.Errorf("pod %s: container status %+v", p.Name, cs)
		}
		for _, typ := range []v1.PodConditionType{v1.PodScheduled, v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
			if podCondition(p, typ) != v1.ConditionTrue {
				t.Errorf("pod %s: condition %s = %q", p.Name, typ, podCondition(p, typ))
			}
		}
		if ids := n.containers(false, "io.kubernetes.pod.uid="+string(p.UID)); len(ids) != 2 {
			t.Errorf("pod %s: running sandbox+container in the runtime: %v, want 2", p.Name, ids)
		}
		ips = append(ips, ip)
		uids = append(uids, string(p.UID))
	}
	if reserved := n.reservedIPs(); !containsAll(reserved, ips) {
		t.Errorf("host-local reservations %v lack pod IPs %v", reserved, ips)
	}

	start = time.Now()
	n.kubectl("", "-n", n.ns, "delete", "deployment", "web", "--wait=false")
	n.poll(90*time.Second, "the deployment's pods deleted from the API", func() (bool, string) {
		list, err := n.c.Client.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			return false, err.Error()
		}
		return len(list.Items) == 0, podsJSON(list.Items)
	})
	t.Logf("pods gone from the API %s after kubectl delete deployment", time.Since(start).Round(time.Millisecond))
	for _, uid := range uids {
		n.waitContainers(30*time.Second, "pod "+uid+" stopped", false, func(ids []string) bool { return len(ids) == 0 }, "io.kubernetes.pod.uid="+uid)
	}
	n.poll(30*time.Second, "pod IPs released by host-local", func() (bool, string) {
		reserved := n.reservedIPs()
		return !slices.ContainsFunc(ips, func(ip string) bool { return slices.Contains(reserved, ip) }), fmt.Sprint(reserved)
	})
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

const readerYAML = `apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: @NS@}
data:
  greeting: hello-cm
  app.conf: key=value
---
apiVersion: v1
kind: Secret
metadata: {name: sec, namespace: @NS@}
stringData:
  password: s3cret
---
apiVersion: v1
kind: Pod
metadata: {name: reader, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c"]
    args:
    - |
      sa=/var/run/secrets/kubernetes.io/serviceaccount
      echo "TOKEN=$(cat $sa/token)"
      echo "NSFILE=$(cat $sa/namespace)"
      echo CA-BEGIN; cat $sa/ca.crt; echo CA-END
      echo "CONF=$(cat /etc/cfg/app.conf)"
      echo "SECFILE=$(cat /etc/sec/password)"
      echo "GREETING=$GREETING"
      echo "PASSWORD=$PASSWORD"
      echo "KSH=$KUBERNETES_SERVICE_HOST"
      echo "KSP=$KUBERNETES_SERVICE_PORT"
      echo RESOLV-BEGIN; cat /etc/resolv.conf; echo RESOLV-END
      echo DONE
      while true; do echo "LIVE=$(cat /etc/cfg/app.conf)"; sleep 1; done
    env:
    - name: GREETING
      valueFrom: {configMapKeyRef: {name: cfg, key: greeting}}
    - name: PASSWORD
      valueFrom: {secretKeyRef: {name: sec, key: password}}
    volumeMounts:
    - {name: cfg, mountPath: /etc/cfg}
    - {name: sec, mountPath: /etc/sec}
  volumes:
  - name: cfg
    configMap: {name: cfg}
  - name: sec
    secret: {secretName: sec}
`

// testTokenConfigMapSecretEnvDNS: a pod of the API reads its service-account
// token (valid by a TokenReview, bound to the pod), namespace and CA from the
// kube-api-access volume, a configMap and a secret volume, env from
// configMapKeyRef/secretKeyRef, the kubernetes service env, and its ClusterFirst
// resolv.conf; a configMap update reaches the volume. Read from the pod's CRI
// log file.
func testTokenConfigMapSecretEnvDNS(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	n.waitNodeReady(60 * time.Second)
	n.applyYAML(readerYAML)
	p := n.waitAPIPod("reader", podStartTimeout, "running", runningAndReady)
	log := n.waitLog(p, "main", "DONE\n", 30*time.Second)
	vals := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.Contains(k, " ") {
			if _, seen := vals[k]; !seen {
				vals[k] = v
			}
		}
	}
	for k, want := range map[string]string{
		"NSFILE": n.ns, "CONF": "key=value", "SECFILE": "s3cret", "GREETING": "hello-cm", "PASSWORD": "s3cret",
		"KSH": "10.96.0.1", "KSP": "443",
	} {
		if vals[k] != want {
			t.Errorf("%s = %q, want %q", k, vals[k], want)
		}
	}
	checkToken(t, n, p, vals["TOKEN"])
	lines := strings.Split(log, "\n")
	checkCA(t, c, strings.Join(between(lines, "CA-BEGIN", "CA-END"), "\n"))
	checkResolv(t, n, strings.Join(between(lines, "RESOLV-BEGIN", "RESOLV-END"), "\n"))

	start := time.Now()
	if _, err := c.Client.CoreV1().ConfigMaps(n.ns).Update(context.Background(), &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: n.ns},
		Data:       map[string]string{"greeting": "hello-cm", "app.conf": "key=changed"},
	}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitLog(p, "main", "LIVE=key=changed", 90*time.Second)
	t.Logf("configMap update visible in the volume after %s", time.Since(start).Round(time.Millisecond))
}

// checkToken verifies the pod's token with a TokenReview: the namespace's
// default service account, bound to the pod.
func checkToken(t *testing.T, n *clusterNode, p *v1.Pod, token string) {
	t.Helper()
	if token == "" {
		t.Error("the pod read an empty service-account token")
		return
	}
	rev, err := n.c.Client.AuthenticationV1().TokenReviews().Create(context.Background(),
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenReview: %v", err)
	}
	st := rev.Status
	if !st.Authenticated || st.Error != "" {
		t.Fatalf("the pod's token is not authenticated: %+v", st)
	}
	if want := "system:serviceaccount:" + n.ns + ":default"; st.User.Username != want {
		t.Errorf("token user %q, want %q", st.User.Username, want)
	}
	if got := st.User.Extra["authentication.kubernetes.io/pod-name"]; len(got) != 1 || got[0] != p.Name {
		t.Errorf("token pod-name %v, want %s (a token bound to the pod)", got, p.Name)
	}
	if got := st.User.Extra["authentication.kubernetes.io/pod-uid"]; len(got) != 1 || got[0] != string(p.UID) {
		t.Errorf("token pod-uid %v, want %s", got, p.UID)
	}
}

// checkCA compares the pod's ca.crt with the cluster CA.
func checkCA(t *testing.T, c *controlplane.Cluster, got string) {
	t.Helper()
	want, err := c.Client.CoreV1().ConfigMaps("default").Get(context.Background(), "kube-root-ca.crt", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(got) != strings.TrimSpace(want.Data["ca.crt"]) {
		t.Errorf("the pod's ca.crt differs from kube-root-ca.crt:\n%s", got)
	}
}

// checkResolv checks the ClusterFirst resolv.conf: the cluster DNS, the
// cluster searches first, ndots:5.
func checkResolv(t *testing.T, n *clusterNode, resolv string) {
	t.Helper()
	var nameservers, search []string
	options := ""
	for _, line := range strings.Split(resolv, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			nameservers = append(nameservers, f[1])
		case "search":
			search = f[1:]
		case "options":
			options = strings.Join(f[1:], " ")
		}
	}
	wantSearch := []string{n.ns + ".svc." + clusterDomain, "svc." + clusterDomain, clusterDomain}
	if !slices.Equal(nameservers, []string{clusterDNS}) || len(search) < 3 || !slices.Equal(search[:3], wantSearch) ||
		!strings.Contains(options, "ndots:5") {
		t.Errorf("resolv.conf: nameservers %v search %v options %q, want [%s], %v first, ndots:5:\n%s",
			nameservers, search, options, clusterDNS, wantSearch, resolv)
	}
}

// graceYAML is a pod whose container needs 3 s to exit after SIGTERM (30 s grace).
func graceYAML() string {
	return podYAML("graceful", 30, `["sh", "-c", "trap 'echo got-term; sleep 3; echo bye; exit 0' TERM; echo started; while true; do sleep 1; done"]`)
}

// testGracefulDeletion: `kubectl delete` of a pod whose container takes 3 s to
// exit after SIGTERM: the kubelet waits for it (within the 30 s grace), reports
// the final status, the pod object goes away, its containers stop and its IP is
// released.
func testGracefulDeletion(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	n.waitNodeReady(60 * time.Second)
	checkActiveDeadline(n)
	n.applyYAML(graceYAML())
	p := n.waitAPIPod("graceful", podStartTimeout, "running", runningAndReady)
	n.waitLog(p, "main", "started\n", 20*time.Second)
	ip := p.Status.PodIP
	if !slices.Contains(n.reservedIPs(), ip) {
		t.Fatalf("host-local reservations %v lack the pod IP %s", n.reservedIPs(), ip)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	w, err := c.Client.CoreV1().Pods(n.ns).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=graceful", ResourceVersion: p.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	n.kubectl("", "-n", n.ns, "delete", "pod", "graceful", "--wait=false")
	var final *v1.Pod
	var took time.Duration
	for took == 0 {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("watch closed before the pod was deleted; last status: %s", podsJSON(podList(final)))
			}
			switch ev.Type {
			case watch.Modified:
				final = ev.Object.(*v1.Pod)
			case watch.Deleted:
				took = time.Since(start)
				final = ev.Object.(*v1.Pod)
			case watch.Error:
				t.Fatalf("watch error: %v", ev.Object)
			}
		case <-ctx.Done():
			t.Fatalf("pod not deleted within 90s; last status: %s", podsJSON(podList(final)))
		}
	}
	t.Logf("pod deleted %s after kubectl delete", took.Round(time.Millisecond))
	if took < 3*time.Second || took > 30*time.Second {
		t.Errorf("deletion took %s, want >= 3s (the container's exit after SIGTERM) and within the 30s grace", took)
	}
	cs := containerStatus(final, "main")
	if cs == nil || cs.State.Terminated == nil || cs.Ready {
		t.Errorf("last status before the delete: container %+v, want terminated, not ready", cs)
	}
	// The log may already be gone with the pod; when it is still there, it ends the handler.
	if log, err := n.podLog(p, "main", 0); err == nil && !strings.Contains(log, "got-term\nbye\n") {
		t.Errorf("the container did not run its SIGTERM handler to the end; log:\n%s", log)
	}
	n.waitContainers(30*time.Second, "the pod's containers stopped", false, func(ids []string) bool { return len(ids) == 0 },
		"io.kubernetes.pod.uid="+string(p.UID))
	n.poll(30*time.Second, "pod IP released by host-local", func() (bool, string) {
		reserved := n.reservedIPs()
		return !slices.Contains(reserved, ip), fmt.Sprint(reserved)
	})
}

func podList(p *v1.Pod) []v1.Pod {
	if p == nil {
		return nil
	}
	return []v1.Pod{*p}
}
