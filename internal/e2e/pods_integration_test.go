//go:build linux

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// podStartTimeout bounds every wait for a pod to run.
const podStartTimeout = 60 * time.Second

// manifest is a static pod named name in the test's namespace with a one-second
// grace period (busybox as PID 1 ignores SIGTERM); spec is the rest of the
// spec, indented by two spaces.
func manifest(name, spec string) string {
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n  namespace: @NS@\nspec:\n  terminationGracePeriodSeconds: 1\n" + spec
}

func podCondition(p *v1.Pod, typ v1.PodConditionType) v1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func containerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// runningAndReady: phase Running, Ready True, every container running and ready.
func runningAndReady(p *v1.Pod) bool {
	if p.Status.Phase != v1.PodRunning || podCondition(p, v1.PodReady) != v1.ConditionTrue ||
		len(p.Status.ContainerStatuses) != len(p.Spec.Containers) {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if !cs.Ready || cs.State.Running == nil {
			return false
		}
	}
	return true
}

// restartCounts maps container name to restart count.
func restartCounts(p *v1.Pod) map[string]int32 {
	m := map[string]int32{}
	for _, cs := range p.Status.ContainerStatuses {
		m[cs.Name] = cs.RestartCount
	}
	return m
}

const webManifest = `  initContainers:
  - name: init
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "echo init-done > /work/index.html"]
    volumeMounts:
    - {name: work, mountPath: /work}
  containers:
  - name: httpd
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "test -f /work/index.html && exec httpd -f -p 8080 -h /work"]
    volumeMounts:
    - {name: work, mountPath: /work}
  - name: sleeper
    image: @IMAGE@
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
  volumes:
  - name: work
    emptyDir: {}
`

// checkPodRuns is test (a), shared by every runtime mode: a static pod with an
// init container and two containers runs, both containers ready, an IP of the
// node's subnet reserved by host-local, the init container's output served over
// the pod network, and the runtime holding the sandbox and both containers.
func checkPodRuns(t *testing.T, n *node) {
	n.writeManifest("web.yaml", manifest("web", webManifest))
	p := n.waitPod("web", podStartTimeout, "running with both containers ready", runningAndReady)
	if len(p.Status.InitContainerStatuses) != 1 {
		t.Fatalf("init container statuses: %+v", p.Status.InitContainerStatuses)
	}
	if term := p.Status.InitContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Fatalf("init container state %+v, want terminated with exit code 0, reason Completed", p.Status.InitContainerStatuses[0].State)
	}
	for _, c := range []v1.PodConditionType{v1.PodInitialized, v1.ContainersReady, v1.PodReady} {
		if podCondition(p, c) != v1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", c, podCondition(p, c))
		}
	}
	ip := p.Status.PodIP
	if !strings.HasPrefix(ip, n.subnet+".") || len(p.Status.PodIPs) == 0 || p.Status.PodIPs[0].IP != ip {
		t.Fatalf("pod IP %q / %v not in the node's subnet %s.0/24", ip, p.Status.PodIPs, n.subnet)
	}
	if ips := n.reservedIPs(); !slices.Contains(ips, ip) {
		t.Errorf("host-local reservations %v do not hold the pod IP %s", ips, ip)
	}
	if p.Spec.NodeName != n.name || p.Namespace != n.ns {
		t.Errorf("nodeName %q namespace %q, want %q %q", p.Spec.NodeName, p.Namespace, n.name, n.ns)
	}
	body := httpGetRetry(t, fmt.Sprintf("http://%s:8080/index.html", ip), 20*time.Second)
	if body != "init-done\n" {
		t.Errorf("GET from the pod = %q, want the init container's output", body)
	}
	uid := "io.kubernetes.pod.uid=" + string(p.UID)
	if ids := n.containers(false, uid); len(ids) != 3 {
		t.Errorf("running sandbox+containers of the pod in the runtime: %v, want 3", ids)
	}
	if ids := n.containers(true, uid); len(ids) != 4 {
		t.Errorf("all sandbox+containers of the pod (init included) in the runtime: %v, want 4", ids)
	}
}

// httpGetRetry GETs url until it answers 200 or timeout passes (traffic only to
// the test's own pod IPs).
func httpGetRetry(t *testing.T, url string, timeout time.Duration) string {
	t.Helper()
	c := http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := c.Get(url)
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				return string(b)
			}
			err = fmt.Errorf("status %d, read error %v", resp.StatusCode, rerr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestIntegrationDockerModePodRuns is (a) in docker mode (the built-in dockershim).
func TestIntegrationDockerModePodRuns(t *testing.T) {
	n := newNode(t)
	n.start()
	checkPodRuns(t, n)
	// One registry: the kubelet's CRI client metrics and the built-in shim's
	// server-side metrics of the same calls.
	body, code, err := n.get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("GET /metrics: %d %v", code, err)
	}
	for _, want := range []string{`kubelet_runtime_operations_total{operation_type="run_podsandbox"}`,
		`dockershim_operations_total{code="OK",operation="RunPodSandbox"}`,
		// The declared deviation: evented PLEG on in docker mode.
		`kubernetes_feature_enabled{name="EventedPLEG",stage="ALPHA"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	checkUpstreamMetrics(t, body, false)
	checkExposure(t, n)
}

// checkExposure checks what each local endpoint serves: the healthz port
// /healthz only (the pod list and metrics answer 404 there, as upstream's), the
// pod list and metrics on the local socket, which only root can connect to.
func checkExposure(t *testing.T, n *node) {
	t.Helper()
	for _, path := range []string{"/pods", "/metrics", "/stats/summary"} {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", n.healthz, path))
		if err != nil {
			t.Fatalf("GET %s on the healthz port: %v", path, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s on the healthz port: %d, want 404", path, resp.StatusCode)
		}
	}
	fi, err := os.Stat(n.localSocket())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("local socket mode %v, want a socket 0600", fi.Mode())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || st.Uid != 0 {
		t.Errorf("local socket owner: %+v, want root", fi.Sys())
	}
	if _, code, err := n.get("/pods"); err != nil || code != http.StatusOK {
		t.Errorf("GET /pods on the local socket: %d %v", code, err)
	}
}

// TestIntegrationDockerModeCrashLoop is (b): a container that exits 1 under
// restartPolicy Always is restarted with back-off.
func TestIntegrationDockerModeCrashLoop(t *testing.T) {
	n := newNode(t)
	n.start()
	n.writeManifest("crash.yaml", manifest("crash", `  containers:
  - name: crash
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "echo crashing; exit 1"]
`))
	sawBackOff := false
	start := time.Now()
	p := n.waitPod("crash", 90*time.Second, "restartCount >= 2 after CrashLoopBackOff, last exit code 1", func(p *v1.Pod) bool {
		cs := containerStatus(p, "crash")
		if cs == nil {
			return false
		}
		if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			sawBackOff = true
		}
		last := cs.LastTerminationState.Terminated
		// Between two crashes the container runs, and a running container
		// without a readiness probe is ready (upstream's rule): the status
		// judged is one in back-off.
		backingOff := cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
		return sawBackOff && backingOff && cs.RestartCount >= 2 && last != nil && last.ExitCode == 1
	})
	t.Logf("restartCount %d after %s", containerStatus(p, "crash").RestartCount, time.Since(start).Round(time.Second))
	if p.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s, want Running (restartPolicy Always)", p.Status.Phase)
	}
	if podCondition(p, v1.PodReady) == v1.ConditionTrue {
		t.Error("a crash-looping pod is Ready")
	}
}

// TestIntegrationDockerModeLivenessProbe is (c): a failing exec liveness probe
// restarts its container; a passing one next to it does not.
func TestIntegrationDockerModeLivenessProbe(t *testing.T) {
	n := newNode(t)
	n.start()
	n.writeManifest("live.yaml", manifest("live", `  containers:
  - name: failing
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
    livenessProbe:
      exec: {command: ["false"]}
      periodSeconds: 1
      failureThreshold: 1
  - name: passing
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
    livenessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
      timeoutSeconds: 10
      failureThreshold: 3
`))
	p := n.waitPod("live", 60*time.Second, "the failing container restarted", func(p *v1.Pod) bool {
		cs := containerStatus(p, "failing")
		return cs != nil && cs.RestartCount >= 1 && cs.LastTerminationState.Terminated != nil
	})
	if cs := containerStatus(p, "passing"); cs == nil || cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("container with a passing liveness probe: %+v, want running, never restarted", cs)
	}
}

// TestIntegrationDockerModeReadinessProbe is (d): Ready follows the readiness
// probe: False while /tmp/ready is missing, then True.
func TestIntegrationDockerModeReadinessProbe(t *testing.T) {
	n := newNode(t)
	n.start()
	n.writeManifest("ready.yaml", manifest("ready", `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
    readinessProbe:
      exec: {command: ["test", "-f", "/tmp/ready"]}
      periodSeconds: 1
`))
	notReady := n.waitPod("ready", podStartTimeout, "running but not ready", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return p.Status.Phase == v1.PodRunning && cs != nil && cs.State.Running != nil && !cs.Ready &&
			podCondition(p, v1.PodReady) == v1.ConditionFalse && podCondition(p, v1.ContainersReady) == v1.ConditionFalse
	})
	// Only then the file appears (a fixed pause could end before the first
	// Running status).
	id := strings.TrimPrefix(containerStatus(notReady, "app").ContainerID, "docker://")
	if out, err := n.s.dockerCLI(context.Background(), "exec", id, "touch", "/tmp/ready"); err != nil {
		t.Fatalf("docker exec touch /tmp/ready: %v: %s", err, out)
	}
	p := n.waitPod("ready", 30*time.Second, "ready once /tmp/ready exists", runningAndReady)
	if podCondition(p, v1.ContainersReady) != v1.ConditionTrue {
		t.Errorf("ContainersReady = %q with Ready True", podCondition(p, v1.ContainersReady))
	}
	if cs := containerStatus(p, "app"); cs.RestartCount != 0 {
		t.Errorf("readiness failures restarted the container %d times", cs.RestartCount)
	}
}
