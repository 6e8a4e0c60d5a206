//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/cmdtest"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// TestIntegrationMultiNodeCluster runs scripts/cluster.sh as a user does: a
// 2-node cluster of node containers (each with systemd, its own dockerd and
// this kubelet in docker mode), joined by TLS bootstrap, with kds-podnet's
// routes, kube-proxy and CoreDNS. Then, on that cluster:
//   - cross-node traffic: a Deployment spread over both nodes answers
//     through its Service's DNS name from a pod on node 1, with replies from
//     the pods of both nodes; the Service's NodePort on node 2 and a node-2
//     pod's own address answer too;
//   - a rolling upgrade of node 2: drained (its pods rescheduled to node 1,
//     its static pod kept), its kubelet swapped for a newer build (the Node
//     reports the new version), then for upstream's kubelet v1.37.1 on this
//     kubelet's shim-only mode, then back, each time Ready with the static
//     pod's container untouched; uncordoned, it takes new pods again; no pod
//     of node 1 restarted or replaced meanwhile;
//   - replacement: node 2's container killed and removed, a new node added
//     (a new name), node 2's Node deleted: the control plane's pod garbage
//     collector removes node 2's pods, and the Deployment is whole again on
//     the new node.
func TestIntegrationMultiNodeCluster(t *testing.T) {
	s := requireSuite(t)
	c := startLocalCluster(t, 2, []string{pauseImage}, busyboxImage)
	node1, node2 := c.name+"-node-1", c.name+"-node-2"

	c.apply(t, webManifests(node1))
	c.waitDeployment(t, "web", 4)
	c.waitPodReady(t, "client")
	byNode := c.podsByNode(t, "app=web")
	if len(byNode[node1]) == 0 || len(byNode[node2]) == 0 {
		t.Fatalf("web pods not spread over both nodes: %v", byNode)
	}
	c.checkServiceFromClient(t, byNode)
	node2IP := c.nodeIP(t, node2)
	port := c.kubectl(t, "", "get", "service", "web", "-o", "jsonpath={.spec.ports[0].nodePort}")
	if got := c.clientGet(t, fmt.Sprintf("http://%s:%s/", node2IP, port)); !c.isWebPod(t, got) {
		t.Fatalf("NodePort %s on node 2 (%s) answered %q, want a web pod's name", port, node2IP, got)
	}
	pod2 := c.pod(t, byNode[node2][0])
	if got := c.clientGet(t, fmt.Sprintf("http://%s:8080/", pod2.Status.PodIP)); got != pod2.Name {
		t.Fatalf("pod %s at %s answered %q", pod2.Name, pod2.Status.PodIP, got)
	}
	t.Logf("cross-node: Service by DNS name, NodePort %s on %s and pod %s answered from %s", port, node2, pod2.Status.PodIP, node1)

	// The cluster's registry: a pod that pulls with Always pulls from it
	// (no outside registry is reachable: a failed pull keeps it Pending).
	c.apply(t, `apiVersion: v1
kind: Pod
metadata: {name: pulled, namespace: default}
spec:
  containers:
  - {name: pause, image: `+pauseImage+`, imagePullPolicy: Always}
`)
	c.waitPodReady(t, "pulled")
	c.kubectl(t, "", "delete", "pod", "pulled", "--grace-period=1")

	// The rolling upgrade of node 2.
	c.nodeExec(t, node2, staticPodManifest, "sh", "-c", "cat >/etc/kubernetes/manifests/static-web.yaml")
	static := "static-web-" + node2
	c.waitPodReady(t, static)
	staticID := c.containerIDs(t, static)
	before := c.podStates(t, node1)
	c.kubectl(t, "", "drain", node2, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=180s")
	c.waitDeployment(t, "web", 4)
	if n := len(c.podsByNode(t, "app=web")[node2]); n != 0 {
		t.Fatalf("%d web pods still on drained %s", n, node2)
	}

	newer := filepath.Join(s.dir, "kubelet-newer")
	const newerVersion = "v1.37.2-kds-upgrade.0"
	buildKubelet(t, newer, "-X github.com/kubelet-dockershim/kubelet/internal/app/options.Version="+newerVersion)
	c.swapKubelet(t, node2, newer, "")
	c.waitNodeVersion(t, node2, newerVersion)
	c.checkContainers(t, static, staticID)

	upstream, err := controlplane.UpstreamBinary(context.Background(), "upstream-kubelet")
	if err != nil {
		t.Fatal(err)
	}
	c.swapKubelet(t, node2, upstream, upstreamDropIn)
	c.waitNodeVersion(t, node2, "v1.37.1")
	c.checkContainers(t, static, staticID)

	c.swapKubelet(t, node2, newer, "")
	c.waitNodeVersion(t, node2, newerVersion)
	c.checkContainers(t, static, staticID)
	// Restarted beside the pod bridge, the kubelet keeps the address
	// upstream's detects (the node name's), not the bridge's.
	if got := c.nodeIP(t, node2); got != node2IP {
		t.Fatalf("after the swaps %s reports InternalIP %s, was %s", node2, got, node2IP)
	}

	c.kubectl(t, "", "uncordon", node2)
	c.kubectl(t, "", "scale", "deployment/web", "--replicas=6")
	c.waitDeployment(t, "web", 6)
	byNode = c.podsByNode(t, "app=web")
	if len(byNode[node2]) == 0 {
		t.Fatalf("uncordoned %s took no new web pod: %v", node2, byNode)
	}
	c.checkServiceFromClient(t, byNode)
	c.checkUndisturbed(t, node1, before)
	t.Logf("upgrade: %s drained, its kubelet swapped (newer build, upstream v1.37.1 + shim-only, back), uncordoned; %d pods of %s undisturbed", node2, len(before), node1)

	// Replacement: node 2 lost, a new node added.
	if out, err := dockerCLI("kill", node2); err != nil {
		t.Fatalf("kill %s: %v: %s", node2, err, out)
	}
	c.script(t, "remove-node", node2)
	node3 := strings.TrimSpace(c.script(t, "add-node", "--image", busyboxImage))
	if node3 != c.name+"-node-3" {
		t.Fatalf("add-node printed %q, want %s-node-3", node3, c.name)
	}
	c.kubectl(t, "", "delete", "node", node2)
	c.poll(t, 3*time.Minute, "the control plane collected "+node2+"'s pods", func() (bool, string) {
		left := c.podsByNode(t, "")[node2]
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})
	c.waitDeployment(t, "web", 6)
	byNode = c.podsByNode(t, "app=web")
	if len(byNode[node3]) == 0 {
		t.Fatalf("no web pod on the new node %s: %v", node3, byNode)
	}
	c.checkServiceFromClient(t, byNode)
	t.Logf("replacement: %s removed, %s joined, %s's pods collected; web pods: %v", node2, node3, node2, byNode)
	c.checkRelay(t)
}

// checkRelay checks that the API server relay still runs with SIGPIPE
// ignored: systemd-socket-proxyd keeps the default, and a node's connection
// closed while a response was spliced to it killed the proxy, cutting every
// node off the API server.
func (c *localCluster) checkRelay(t *testing.T) {
	t.Helper()
	pid, err := os.ReadFile(filepath.Join(c.state, "relay.pid"))
	if err != nil {
		t.Fatalf("the relay's pid: %v", err)
	}
	status, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(string(pid)), "status"))
	if err != nil {
		t.Fatalf("the relay (pid %s) is gone: %v", strings.TrimSpace(string(pid)), err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if mask, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			bits, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
			if err != nil || bits&(1<<(uint(syscall.SIGPIPE)-1)) == 0 {
				t.Errorf("the relay does not ignore SIGPIPE (SigIgn %s)", strings.TrimSpace(mask))
			}
			return
		}
	}
	t.Error("no SigIgn line in the relay's status")
}

// localCluster is a running scripts/cluster.sh cluster.
type localCluster struct {
	name       string
	env        []string
	state      string // KDS_CLUSTER_STATE
	scriptPath string
	kubeconfig string
	kubectlBin string
	client     kubernetes.Interface
}

// startLocalCluster runs `cluster.sh up --nodes N` (images copied into each
// node, registryImages served by the cluster's registry) with a name, ports and a pod network of this test process's own, and
// `cluster.sh down` at the end (after the nodes' journals, if the test
// failed).
func startLocalCluster(t *testing.T, nodes int, registryImages []string, images ...string) *localCluster {
	t.Helper()
	script, err := controlplane.Script()
	if err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	c := &localCluster{
		name:       fmt.Sprintf("e2e%d", pid%100000),
		scriptPath: filepath.Join(filepath.Dir(script), "cluster.sh"),
	}
	c.state = filepath.Join(t.TempDir(), "cluster")
	c.env = append(os.Environ(),
		"KDS_CLUSTER_NAME="+c.name,
		"KDS_CLUSTER_STATE="+c.state,
		fmt.Sprintf("KDS_CLUSTER_PORT_BASE=%d", 20000+1000*(pid%40)),
		fmt.Sprintf("KDS_CLUSTER_POD_CIDR=10.%d.0.0/16", 226+pid%8),
	)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.nodeNames() {
				out, _ := dockerCLI("exec", n, "journalctl", "--no-pager", "-n", "40", "-u", "kubelet", "-u", "kds-podnet", "-u", "kube-proxy", "-u", "dockershim")
				t.Logf("--- journal of %s:\n%s", n, out)
			}
		}
		c.scriptQuiet(context.Background(), "down")
	})
	start := time.Now()
	args := []string{"up", "--nodes", fmt.Sprint(nodes)}
	for _, img := range images {
		args = append(args, "--image", img)
	}
	for _, img := range registryImages {
		args = append(args, "--registry-image", img)
	}
	c.script(t, args...)
	t.Logf("cluster.sh up --nodes %d: %v", nodes, time.Since(start).Round(time.Second))
	for _, line := range strings.Split(c.script(t, "env"), "\n") {
		k, v, _ := strings.Cut(line, "=")
		switch k {
		case "KUBECONFIG":
			c.kubeconfig = v
		case "KDS_KUBECTL":
			c.kubectlBin = v
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *localCluster) scriptQuiet(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", append([]string{c.scriptPath}, args...)...)
	cmd.Env = c.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("cluster.sh %s: %w\n%s", strings.Join(args, " "), err, cmdtest.LastLines(stderr.String(), 40))
	}
	return stdout.String(), nil
}

func (c *localCluster) script(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.scriptQuiet(context.Background(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (c *localCluster) nodeNames() []string {
	out, _ := dockerCLI("ps", "-a", "--filter", "label=io.kubelet-dockershim.cluster="+c.name, "--format", "{{.Names}}")
	return strings.Fields(out)
}

// kubectl runs kubectl with the cluster's admin kubeconfig.
func (c *localCluster) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.kubectlBin, append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (c *localCluster) apply(t *testing.T, yaml string) { c.kubectl(t, yaml, "apply", "-f", "-") }

// nodeExec runs a command in a node container with stdin.
func (c *localCluster) nodeExec(t *testing.T, node, stdin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", append([]string{"exec", "-i", node}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in %s: %s: %v\n%s", node, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (c *localCluster) poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v (%s)", what, timeout, detail)
		}
		time.Sleep(time.Second)
	}
}

func (c *localCluster) pod(t *testing.T, name string) *v1.Pod {
	t.Helper()
	p, err := c.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (c *localCluster) waitPodReady(t *testing.T, name string) {
	t.Helper()
	c.poll(t, 3*time.Minute, "pod "+name+" Ready", func() (bool, string) {
		p, err := c.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == v1.PodReady && cond.Status == v1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
	})
}

// waitDeployment waits until the Deployment has replicas available and
// updated pods only.
func (c *localCluster) waitDeployment(t *testing.T, name string, replicas int32) {
	t.Helper()
	c.poll(t, 4*time.Minute, fmt.Sprintf("deployment %s with %d available", name, replicas), func() (bool, string) {
		d, err := c.client.AppsV1().Deployments("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := d.Status
		return st.ObservedGeneration == d.Generation && st.AvailableReplicas == replicas && st.UpdatedReplicas == replicas &&
				st.Replicas == replicas,
			fmt.Sprintf("status %+v", st)
	})
}

// podsByNode maps node name to the names of the default namespace's pods
// (matching selector unless empty) that are bound to it and not being
// deleted.
func (c *localCluster) podsByNode(t *testing.T, selector string) map[string][]string {
	t.Helper()
	pods, err := c.client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = append(out[p.Spec.NodeName], p.Name)
		}
	}
	return out
}

func (c *localCluster) isWebPod(t *testing.T, name string) bool {
	t.Helper()
	for _, pods := range c.podsByNode(t, "app=web") {
		if slices.Contains(pods, name) {
			return true
		}
	}
	return false
}

// clientGet fetches url from the client pod (busybox wget within 5 s: the
// image's wget -T crashes) and returns the body; a failed fetch returns "".
func (c *localCluster) clientGet(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.kubectlBin, "--kubeconfig", c.kubeconfig, "exec", "client", "--",
		"timeout", "5", "wget", "-q", "-O", "-", url).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// checkServiceFromClient fetches the Service by its DNS name from the client
// pod until pods of every node in byNode have answered (at most 60 tries).
func (c *localCluster) checkServiceFromClient(t *testing.T, byNode map[string][]string) {
	t.Helper()
	nodeOf := map[string]string{}
	for node, pods := range byNode {
		for _, p := range pods {
			nodeOf[p] = node
		}
	}
	seen := map[string]bool{}
	var answers []string
	for i := 0; i < 60 && len(seen) < len(byNode); i++ {
		got := c.clientGet(t, "http://web.default.svc.cluster.local/")
		answers = append(answers, got)
		if node, ok := nodeOf[got]; ok {
			seen[node] = true
		}
	}
	if len(seen) < len(byNode) {
		t.Fatalf("web.default.svc.cluster.local answered from nodes %v only, want all of %v; answers: %q", seen, byNode, answers)
	}
}

func (c *localCluster) nodeIP(t *testing.T, node string) string {
	t.Helper()
	n, err := c.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP {
			return a.Address
		}
	}
	t.Fatalf("node %s has no InternalIP: %v", node, n.Status.Addresses)
	return ""
}

// containerIDs are a pod's container IDs in its status.
func (c *localCluster) containerIDs(t *testing.T, pod string) []string {
	t.Helper()
	var ids []string
	for _, st := range c.pod(t, pod).Status.ContainerStatuses {
		ids = append(ids, st.ContainerID)
	}
	return ids
}

// checkContainers waits until the pod is Ready again and checks that its
// containers are those of ids.
func (c *localCluster) checkContainers(t *testing.T, pod string, ids []string) {
	t.Helper()
	c.waitPodReady(t, pod)
	if got := c.containerIDs(t, pod); !slices.Equal(got, ids) {
		t.Fatalf("pod %s's containers are %v, were %v", pod, got, ids)
	}
}

// podState is what a pod that nothing disturbed keeps.
type podState struct {
	uid      string
	ids      []string
	restarts int32
}

func (c *localCluster) podStates(t *testing.T, node string) map[string]podState {
	t.Helper()
	pods, err := c.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]podState{}
	for _, p := range pods.Items {
		st := podState{uid: string(p.UID)}
		for _, cs := range p.Status.ContainerStatuses {
			st.ids = append(st.ids, cs.ContainerID)
			st.restarts += cs.RestartCount
		}
		out[p.Namespace+"/"+p.Name] = st
	}
	return out
}

// checkUndisturbed checks that each pod of before still runs on node with
// the same UID and containers and no restart.
func (c *localCluster) checkUndisturbed(t *testing.T, node string, before map[string]podState) {
	t.Helper()
	after := c.podStates(t, node)
	for name, was := range before {
		now, ok := after[name]
		if !ok {
			t.Errorf("pod %s on %s is gone", name, node)
			continue
		}
		if now.uid != was.uid || !slices.Equal(now.ids, was.ids) || now.restarts != was.restarts {
			t.Errorf("pod %s on %s was disturbed: %+v, was %+v", name, node, now, was)
		}
	}
}

// swapKubelet stops node's kubelet, puts bin in as /usr/bin/kubelet
// (dropIn "") or as /usr/bin/upstream-kubelet run by dropIn on this
// kubelet's shim-only unit, and starts it again.
func (c *localCluster) swapKubelet(t *testing.T, node, bin, dropIn string) {
	t.Helper()
	c.nodeExec(t, node, "", "systemctl", "stop", "kubelet", "dockershim")
	target := "/usr/bin/kubelet"
	if dropIn != "" {
		target = "/usr/bin/upstream-kubelet"
	}
	if out, err := dockerCLI("cp", bin, node+":"+target); err != nil {
		t.Fatalf("docker cp %s %s:%s: %v: %s", bin, node, target, err, out)
	}
	const dropInPath = "/etc/systemd/system/kubelet.service.d/20-upstream.conf"
	if dropIn != "" {
		c.nodeExec(t, node, dropIn, "sh", "-c", "cat >"+dropInPath+" && systemctl daemon-reload && systemctl start dockershim kubelet")
	} else {
		c.nodeExec(t, node, "", "sh", "-c", "rm -f "+dropInPath+" && systemctl daemon-reload && systemctl start kubelet")
	}
}

// waitNodeVersion waits until node is Ready and reports kubelet version v.
func (c *localCluster) waitNodeVersion(t *testing.T, node, v string) {
	t.Helper()
	c.poll(t, 3*time.Minute, fmt.Sprintf("node %s Ready with kubelet %s", node, v), func() (bool, string) {
		n, err := c.client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		ready := nodeCondition(n, v1.NodeReady)
		return ready != nil && ready.Status == v1.ConditionTrue && n.Status.NodeInfo.KubeletVersion == v,
			fmt.Sprintf("version %s, ready %v", n.Status.NodeInfo.KubeletVersion, ready)
	})
}

// buildKubelet builds this kubelet into out with extra -ldflags.
func buildKubelet(t *testing.T, out, ldflags string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-ldflags", ldflags, "-o", out, ".")
	cmd.Dir = filepath.Join("..", "..")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
}

func dockerCLI(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	return string(out), err
}

// upstreamDropIn runs upstream's kubelet (it reads the same config file,
// whose containerRuntimeEndpoint is the shim-only unit's socket) after
// dockershim.service. Upstream's refuses cgroup v1 unless told.
const upstreamDropIn = `[Unit]
Requires=dockershim.service
After=dockershim.service
[Service]
ExecStart=
ExecStart=/usr/bin/upstream-kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS --fail-cgroupv1=false
`

// staticPodManifest is node 2's static pod.
const staticPodManifest = `apiVersion: v1
kind: Pod
metadata: {name: static-web, namespace: default}
spec:
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: Never
    command: [sleep, "3600"]
`

// webManifests: a Deployment of 4 busybox httpd pods answering their own
// name on 8080, spread over the schedulable nodes (a cordoned node does not
// count: nodeTaintsPolicy Honor), its NodePort Service, and a client pod on
// node clientNode, privileged (in a node container that Engine 20.10 made,
// the capabilities the node lacks are ones its dockerd does not know).
func webManifests(clientNode string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 4
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 2
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, nodeTaintsPolicy: Honor, labelSelector: {matchLabels: {app: web}}}
      containers:
      - name: web
        image: ` + busyboxImage + `
        imagePullPolicy: Never
        command: [sh, -c, 'mkdir -p /www && hostname >/www/index.html && exec httpd -f -p 8080 -h /www']
        ports: [{containerPort: 8080}]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 2}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default}
spec:
  nodeName: ` + clientNode + `
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: ` + busyboxImage + `
    imagePullPolicy: Never
    command: [sleep, "3600"]
    securityContext: {privileged: true}
`
}
