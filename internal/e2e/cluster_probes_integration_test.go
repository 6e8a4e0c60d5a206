//go:build linux

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// testProbesHooksSidecars (issue 30 item 10): probes, hooks and sidecars
// through the real control plane, on one pod:
//   - sidecar "helper" (an init container with restartPolicy Always) serves
//     HTTP on 8081 and has a tcpSocket startup probe: the app container starts
//     after it;
//   - sidecar "flaky" exits every 2 s: it is restarted while the pod runs,
//     the app container is not;
//   - app container "web" serves HTTP on 8080 with an httpGet startup probe,
//     a tcpSocket readiness probe and an exec liveness probe; its postStart
//     hook is an httpGet to the helper (seen in the helper's log) and its
//     preStop hook sleeps 2 s (the deletion takes at least that);
//   - /metrics/probes counts the successful probes of each kind for web, with
//     upstream's labels.
func testProbesHooksSidecars(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.extra = append(n.extra, "--client-ca-file="+c.CAFile) // /metrics/probes with the API server's client certificate
	n.createNamespace()
	n.start()
	n.waitNodeReady(90 * time.Second)
	n.applyYAML(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: probes, namespace: @NS@}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 10
  initContainers:
  - name: helper
    image: @IMAGE@
    imagePullPolicy: Never
    restartPolicy: Always
    command: [sh, -c, "mkdir -p /www && echo ok > /www/poststart && exec httpd -f -vv -p 8081 -h /www"]
    startupProbe: {tcpSocket: {port: 8081}, periodSeconds: 1, failureThreshold: 30}
  - name: flaky
    image: @IMAGE@
    imagePullPolicy: Never
    restartPolicy: Always
    command: [sh, -c, "sleep 2; exit 3"]
  containers:
  - name: web
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sh, -c, "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"]
    startupProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1, failureThreshold: 30}
    readinessProbe: {tcpSocket: {port: 8080}, periodSeconds: 1}
    livenessProbe: {exec: {command: [test, -f, /www/healthz]}, periodSeconds: 1, failureThreshold: 3}
    lifecycle:
      postStart: {httpGet: {path: /poststart, port: 8081}}
      preStop: {sleep: {seconds: 2}}
`, n.name))
	var p *v1.Pod
	p = n.waitAPIPod("probes", podStartTimeout, "web started and ready, flaky restarted", func(p *v1.Pod) bool {
		web, flaky := containerStatus(p, "web"), statusNamed(p.Status.InitContainerStatuses, "flaky")
		return web != nil && web.Ready && web.Started != nil && *web.Started && web.State.Running != nil &&
			flaky != nil && flaky.RestartCount >= 1
	})
	if web := containerStatus(p, "web"); web.RestartCount != 0 {
		t.Errorf("web restarted %d times: a sidecar's restart must not restart it", web.RestartCount)
	}
	if helper := statusNamed(p.Status.InitContainerStatuses, "helper"); helper == nil || helper.State.Running == nil ||
		helper.Started == nil || !*helper.Started {
		t.Errorf("helper sidecar %+v, want running and started", helper)
	}
	n.waitLog(p, "helper", "url:/poststart", 30*time.Second)

	cred := apiServerCred(t, c)
	n.poll(30*time.Second, "/metrics/probes counts web's successful probes", func() (bool, string) {
		code, body := n.kubeletDo("GET", "/metrics/probes", cred)
		if code != 200 {
			return false, fmt.Sprintf("status %d", code)
		}
		for _, kind := range []string{"Startup", "Readiness", "Liveness"} {
			want := fmt.Sprintf(`prober_probe_total{container="web",namespace="%s",pod="probes",pod_uid="%s",probe_type="%s",result="successful"}`,
				n.ns, p.UID, kind)
			if !strings.Contains(body, want) {
				return false, "no " + want
			}
		}
		return true, ""
	})

	start := time.Now()
	n.kubectl("", "delete", "pod", "probes", "-n", n.ns, "--wait=false")
	n.waitAPIPodGone("probes", string(p.UID), 60*time.Second)
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("deletion took %s: the preStop sleep of 2s did not run", took)
	}
}

func statusNamed(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}
