//go:build linux

package e2e

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// plrPodYAML is a pod of n.ns bound to the node with pod-level resources
// resources (a YAML flow mapping) and one container, main, with no resources
// of its own and the resizePolicy given.
func (n *clusterNode) plrPodYAML(name, resources, resizePolicy string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: @NS@}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  resources: %s
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resizePolicy: %s
`, name, n.name, resources, resizePolicy)
}

// testInPlaceResizePodLevel: the node declares the features pod-level and
// init container resizes need (the API server refuses them otherwise); a
// container without resources of its own runs under its pod's pod-level
// limits; `kubectl patch --subresource resize` of the pod-level resources
// resizes the pod cgroup and that container in place (or restarts it, by its
// resizePolicy), and the status follows (observedGeneration, the pod's
// allocatedResources, no resize condition left); a pod-level memory limit
// below the pod's usage is refused (PodResizeInProgress, reason Error) and
// undone by the next resize; a running regular init container is resized in
// place.
func testInPlaceResizePodLevel(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.extra = append(n.extra, noResyncDuringTest)
	n.createNamespace()
	n.start()
	node := n.waitNodeReady(90 * time.Second)
	want := []string{"ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingInitContainers", "RestartAllContainersOnContainerExits"}
	if !slices.Equal(node.Status.DeclaredFeatures, want) {
		t.Errorf("declaredFeatures = %v, want %v", node.Status.DeclaredFeatures, want)
	}

	n.applyYAML(n.plrPodYAML("plr", "{requests: {cpu: 100m, memory: 96Mi}, limits: {cpu: 200m, memory: 128Mi}}",
		"[{resourceName: cpu, restartPolicy: NotRequired}, {resourceName: memory, restartPolicy: NotRequired}]"))
	p := n.waitAPIPod("plr", podStartTimeout, "running with its pod-level resources reported", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return p.Status.Phase == v1.PodRunning && cs != nil && cs.Ready && p.Status.Resources != nil
	})
	checkPodLevelStatus(t, p, "100m", "96Mi")
	ids := n.containers(false, "io.kubernetes.pod.uid="+string(p.UID), "io.kubernetes.container.name=main")
	if len(ids) != 1 {
		t.Fatalf("running containers of plr/main: %v", ids)
	}
	checkPLRCgroups(t, n, p, ids[0], 128<<20, 20000, 102)

	// Pod-level cpu and memory up, in place.
	n.kubectl("", "-n", n.ns, "patch", "pod", "plr", "--subresource", "resize", "-p",
		`{"spec":{"resources":{"requests":{"cpu":"150m","memory":"96Mi"},"limits":{"cpu":"300m","memory":"192Mi"}}}}`)
	p = n.waitPLRResized("plr", "150m")
	checkPodLevelStatus(t, p, "150m", "96Mi")
	if cs := containerStatus(p, "main"); cs.RestartCount != 0 {
		t.Errorf("the pod-level resize restarted main %d times", cs.RestartCount)
	}
	checkPLRCgroups(t, n, p, ids[0], 192<<20, 30000, 153)
	n.waitEvent(p, "ResizeCompleted", "Pod resize completed: ")

	// A memory limit below the pod's usage: refused, nothing changes.
	n.kubectl("", "-n", n.ns, "patch", "pod", "plr", "--subresource", "resize", "-p",
		`{"spec":{"resources":{"requests":{"memory":"64Ki"},"limits":{"memory":"64Ki"}}}}`)
	p = n.waitAPIPod("plr", 60*time.Second, "resize refused", func(p *v1.Pod) bool {
		c := findCondition(p, v1.PodResizeInProgress)
		return c != nil && c.Reason == "Error"
	})
	if msg := findCondition(p, v1.PodResizeInProgress).Message; !regexp.MustCompile(`memory limit \(65536\) below current usage \(\d+\)`).MatchString(msg) {
		t.Errorf("PodResizeInProgress message %q, want the usage error", msg)
	}
	checkPLRCgroups(t, n, p, ids[0], 192<<20, 30000, 153)
	n.kubectl("", "-n", n.ns, "patch", "pod", "plr", "--subresource", "resize", "-p",
		`{"spec":{"resources":{"requests":{"memory":"96Mi"},"limits":{"memory":"160Mi"}}}}`)
	p = n.waitPLRResized("plr", "150m")
	checkPLRCgroups(t, n, p, ids[0], 160<<20, 30000, 153)

	// RestartContainer for memory: a pod-level memory resize restarts main.
	n.applyYAML(n.plrPodYAML("plr-restart", "{requests: {cpu: 100m, memory: 96Mi}, limits: {cpu: 100m, memory: 96Mi}}",
		"[{resourceName: memory, restartPolicy: RestartContainer}]"))
	n.waitAPIPod("plr-restart", podStartTimeout, "running", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.Ready
	})
	n.kubectl("", "-n", n.ns, "patch", "pod", "plr-restart", "--subresource", "resize", "-p",
		`{"spec":{"resources":{"requests":{"memory":"128Mi"},"limits":{"memory":"128Mi"}}}}`)
	p = n.waitPLRResized("plr-restart", "100m")
	if cs := containerStatus(p, "main"); cs.RestartCount != 1 {
		t.Errorf("main restarted %d times, want once", cs.RestartCount)
	}
	restarted := n.containers(false, "io.kubernetes.pod.uid="+string(p.UID), "io.kubernetes.container.name=main")
	if len(restarted) != 1 || n.dockerHostConfig(restarted[0], "{{.HostConfig.Memory}}") != strconv.Itoa(128<<20) {
		t.Errorf("restarted main %v: want one container with the pod's new memory limit", restarted)
	}
	n.waitEvent(p, "Killing", "Container main resize requires restart")

	testInitContainerResize(t, n)
}

// waitPLRResized waits until pod name's latest resize is done: observed
// (observedGeneration), no resize condition left, ready, and the pod's
// allocated cpu request at cpu.
func (n *clusterNode) waitPLRResized(name, cpu string) *v1.Pod {
	n.t.Helper()
	return n.waitAPIPod(name, 90*time.Second, "pod-level resize done", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return p.Status.ObservedGeneration == p.Generation && findCondition(p, v1.PodResizeInProgress) == nil &&
			findCondition(p, v1.PodResizePending) == nil && cs != nil && cs.Ready &&
			p.Status.AllocatedResources.Cpu().Equal(resource.MustParse(cpu))
	})
}

// checkPodLevelStatus checks the pod's own allocatedResources, and that its
// conditions carry its generation.
func checkPodLevelStatus(t *testing.T, p *v1.Pod, cpu, mem string) {
	t.Helper()
	if !p.Status.AllocatedResources.Cpu().Equal(resource.MustParse(cpu)) || !p.Status.AllocatedResources.Memory().Equal(resource.MustParse(mem)) {
		t.Errorf("pod allocatedResources = %v, want %s/%s", p.Status.AllocatedResources, cpu, mem)
	}
	if p.Status.ObservedGeneration != p.Generation {
		t.Errorf("observedGeneration %d, want %d", p.Status.ObservedGeneration, p.Generation)
	}
	for _, typ := range []v1.PodConditionType{v1.PodReady, v1.PodInitialized, v1.ContainersReady} {
		if c := findCondition(p, typ); c == nil || c.ObservedGeneration != p.Generation {
			t.Errorf("%s = %+v, want observedGeneration %d", typ, c, p.Generation)
		}
	}
}

// checkPLRCgroups checks that container id (without limits of its own) runs
// under the pod's memory limit and cpu quota, and the pod cgroup's values.
func checkPLRCgroups(t *testing.T, n *clusterNode, p *v1.Pod, id string, memory int64, quota int, shares int) {
	t.Helper()
	if got, want := n.dockerHostConfig(id, "{{.HostConfig.Memory}} {{.HostConfig.CpuQuota}}"), fmt.Sprintf("%d %d", memory, quota); got != want {
		t.Errorf("Docker's memory and cpu quota of main: %s, want %s", got, want)
	}
	podCgroup := n.cgroupRoot + "/kubepods/burstable/pod" + string(p.UID)
	for _, v := range []struct{ controller, file, want string }{
		{"memory", "memory.limit_in_bytes", strconv.FormatInt(memory, 10)},
		{"cpu", "cpu.cfs_quota_us", strconv.Itoa(quota)},
		{"cpu", "cpu.shares", strconv.Itoa(shares)},
	} {
		if got := cgroupValue(t, v.controller, podCgroup, v.file); got != v.want {
			t.Errorf("pod cgroup %s = %s, want %s", v.file, got, v.want)
		}
	}
}

// testInitContainerResize: a running regular init container is resized in
// place (its status and Docker's values follow) while the pod waits for it.
func testInitContainerResize(t *testing.T, n *clusterNode) {
	n.applyYAML(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: init-resize, namespace: @NS@}
spec:
  nodeName: %s
  terminationGracePeriodSeconds: 1
  initContainers:
  - name: init
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resources: {requests: {cpu: 20m, memory: 35Mi}, limits: {cpu: 20m, memory: 35Mi}}
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resources: {requests: {cpu: 20m, memory: 35Mi}, limits: {cpu: 20m, memory: 35Mi}}
`, n.name))
	initStatus := func(p *v1.Pod) *v1.ContainerStatus {
		if len(p.Status.InitContainerStatuses) == 0 {
			return nil
		}
		return &p.Status.InitContainerStatuses[0]
	}
	p := n.waitAPIPod("init-resize", podStartTimeout, "init container running", func(p *v1.Pod) bool {
		st := initStatus(p)
		return st != nil && st.State.Running != nil && st.Resources != nil
	})
	ids := n.containers(false, "io.kubernetes.pod.uid="+string(p.UID), "io.kubernetes.container.name=init")
	if len(ids) != 1 {
		t.Fatalf("running init containers: %v", ids)
	}
	n.kubectl("", "-n", n.ns, "patch", "pod", "init-resize", "--subresource", "resize", "-p",
		`{"spec":{"initContainers":[{"name":"init","resources":{"requests":{"cpu":"25m","memory":"40Mi"},"limits":{"cpu":"25m","memory":"40Mi"}}}]}}`)
	p = n.waitAPIPod("init-resize", 60*time.Second, "init container resized in place", func(p *v1.Pod) bool {
		st := initStatus(p)
		return p.Status.ObservedGeneration == p.Generation && findCondition(p, v1.PodResizeInProgress) == nil &&
			st != nil && st.Resources != nil && st.Resources.Limits.Memory().Equal(resource.MustParse("40Mi"))
	})
	checkResourcesStatus(t, initStatus(p), "25m", "40Mi", "25m", "40Mi")
	if st := initStatus(p); st.RestartCount != 0 || st.State.Running == nil {
		t.Errorf("init container after the resize: %+v, want the same one running", st)
	}
	if got, want := n.dockerHostConfig(ids[0], "{{.HostConfig.Memory}} {{.HostConfig.CpuQuota}}"), fmt.Sprintf("%d 2500", 40<<20); got != want {
		t.Errorf("Docker's memory and cpu quota of init: %s, want %s", got, want)
	}
}
