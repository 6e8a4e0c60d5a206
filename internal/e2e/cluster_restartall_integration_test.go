//go:build linux

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// restartAllPod is upstream's e2e pod "[sig-node] Pod Extended
// (RestartAllContainers) should restart all containers on regular container
// exit" bound to the node: restartPolicy Never, an init container, a sidecar,
// and the regular containers source (exits 42 the first time, which its
// RestartAllContainers rule matches, then sleeps) and regular.
func (n *clusterNode) restartAllPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: @NS@}
spec:
  nodeName: %s
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: init
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "exit 0"]
  - name: sidecar
    image: @IMAGE@
    imagePullPolicy: Never
    restartPolicy: Always
    command: ["sh", "-c", "sleep 10000"]
  containers:
  - name: source
    image: @IMAGE@
    imagePullPolicy: Never
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {operator: In, values: [42]}
    command: ["sh", "-c", "if [ -f /mnt/restart-complete ]; then sleep 10000; else touch /mnt/restart-complete; exit 42; fi"]
    volumeMounts:
    - {name: workdir, mountPath: /mnt}
  - name: regular
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "sleep 10000"]
  volumes:
  - name: workdir
    emptyDir: {}
`, name, n.name)
}

// testRestartAllContainers (KEP-5532): the node declares
// RestartAllContainersOnContainerExits, the API server and the kubelet admit
// a pod with a RestartAllContainers rule, and the exit matching it restarts
// the whole pod in place, as upstream's e2e checks: every container
// (the init container re-run from the start, the sidecar, the source and the
// other regular container) has restartCount 1 and a last termination
// (upstream's RestartingAllContainers, exit 137), the init container
// completed again, the others run, the sandbox is the same, the pod stays
// Running and Initialized, its AllContainersRestarting condition is False
// again, the killed containers got a "killing" Killing event, and nothing
// restarts again afterwards (no loop).
func testRestartAllContainers(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	node := n.waitNodeReady(90 * time.Second)
	if !containsString(node.Status.DeclaredFeatures, "RestartAllContainersOnContainerExits") {
		t.Fatalf("node declaredFeatures %v, want RestartAllContainersOnContainerExits", node.Status.DeclaredFeatures)
	}
	n.applyYAML(n.restartAllPod("restart-all"))
	all := []string{"init", "sidecar", "source", "regular"}
	p := n.waitRestartedOnce("restart-all", all, []string{"sidecar", "source", "regular"})
	if init := anyContainerStatus(p, "init").State.Terminated; init == nil || init.Reason != "Completed" {
		t.Errorf("init container %+v, want Completed again", init)
	}
	if p.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s, want Running", p.Status.Phase)
	}
	checkPodCondition(t, p, v1.PodInitialized, v1.ConditionTrue)
	checkPodCondition(t, p, v1.AllContainersRestarting, v1.ConditionFalse)
	if ids := n.containers(true, "io.kubernetes.pod.uid="+string(p.UID), "io.kubernetes.docker.type=podsandbox"); len(ids) != 1 {
		t.Errorf("sandboxes of the pod %v, want the one it started with", ids)
	}
	n.waitEvent(p, "Killing", "killing")

	// No loop: the killed containers' exits (137) match no rule.
	time.Sleep(10 * time.Second)
	p, err := n.apiPod("restart-all")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range all {
		if cs := anyContainerStatus(p, name); cs == nil || cs.RestartCount != 1 {
			t.Errorf("container %s after 10s: %+v, want still restartCount 1", name, cs)
		}
	}
	if err := c.Client.CoreV1().Pods(n.ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete the pod: %v", err)
	}
	n.waitAPIPodGone(p.Name, string(p.UID), 60*time.Second)

	// Upstream's "should restart init and sidecar containers on init
	// container exit": the source is the last init container; the pod
	// starts over from its sidecar, and the regular container, which had
	// not run yet, starts once.
	n.applyYAML(initSourcePod(n.name))
	p = n.waitRestartedOnce("restart-init", []string{"sidecar", "init", "source-init"}, []string{"sidecar", "regular"})
	if cs := anyContainerStatus(p, "regular"); cs.RestartCount != 0 {
		t.Errorf("regular container %+v, want never restarted (it had not run)", cs)
	}
	checkPodCondition(t, p, v1.AllContainersRestarting, v1.ConditionFalse)
}

// initSourcePod is upstream's e2e pod for an init container exit bound to
// node: a sidecar, an init container, and the init container source-init
// (exits 42 the first time, 0 after), then one regular container.
func initSourcePod(node string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: restart-init, namespace: @NS@}
spec:
  nodeName: %s
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: sidecar
    image: @IMAGE@
    imagePullPolicy: Never
    restartPolicy: Always
    command: ["sh", "-c", "sleep 10000"]
  - name: init
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "exit 0"]
  - name: source-init
    image: @IMAGE@
    imagePullPolicy: Never
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {operator: In, values: [42]}
    command: ["sh", "-c", "if [ -f /mnt/init-complete ]; then exit 0; else touch /mnt/init-complete; exit 42; fi"]
    volumeMounts:
    - {name: workdir, mountPath: /mnt}
  containers:
  - name: regular
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "sleep 10000"]
  volumes:
  - name: workdir
    emptyDir: {}
`, node)
}

// waitRestartedOnce waits (3 minutes, as upstream's e2e) until every one of
// restarted has restarted and has a last termination and every one of
// running runs, then checks that each of restarted restarted once, with
// upstream's RestartingAllContainers last termination (exit 137), and that
// the regular init containers among them completed again.
func (n *clusterNode) waitRestartedOnce(pod string, restarted, running []string) *v1.Pod {
	n.t.Helper()
	p := n.waitAPIPod(pod, 3*time.Minute, "all containers restarted once and running again", func(p *v1.Pod) bool {
		for _, name := range restarted {
			cs := anyContainerStatus(p, name)
			if cs == nil || cs.RestartCount < 1 || cs.LastTerminationState.Terminated == nil {
				return false
			}
		}
		for _, name := range running {
			if !runningStatus(p, name) {
				return false
			}
		}
		return true
	})
	for _, name := range restarted {
		cs := anyContainerStatus(p, name)
		last := cs.LastTerminationState.Terminated
		if cs.RestartCount != 1 || last.Reason != "RestartingAllContainers" || last.ExitCode != 137 {
			n.t.Errorf("pod %s container %s: restartCount %d, last termination %+v; want 1 and RestartingAllContainers (137)",
				pod, name, cs.RestartCount, last)
		}
		if !slices.Contains(running, name) && (cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0) {
			n.t.Errorf("pod %s init container %s: %+v, want completed again", pod, name, cs.State)
		}
	}
	return p
}

// anyContainerStatus finds the status of an init or regular container.
func anyContainerStatus(p *v1.Pod, name string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

func runningStatus(p *v1.Pod, name string) bool {
	cs := anyContainerStatus(p, name)
	return cs != nil && cs.State.Running != nil
}

func checkPodCondition(t *testing.T, p *v1.Pod, typ v1.PodConditionType, want v1.ConditionStatus) {
	t.Helper()
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			if c.Status != want {
				t.Errorf("condition %s %s (%s: %s), want %s", typ, c.Status, c.Reason, c.Message, want)
			}
			return
		}
	}
	t.Errorf("no condition %s in %+v, want %s", typ, p.Status.Conditions, want)
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
