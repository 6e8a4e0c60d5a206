//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// noResyncDuringTest pushes the periodic full sync out of a test's reach:
// what it waits for must come from the event that asks for it (a resize
// completes through the PLEG's reinspection, not the next resync).
const noResyncDuringTest = "--sync-frequency=10m"

// testInPlaceResize (issue 12 item 5): `kubectl patch --subresource resize`
// through the real API server changes a running container's memory and cpu
// in place (restart count 0, same container: Docker's values and the pod
// cgroup's follow, the status reports allocatedResources and resources, and
// PodResizeInProgress clears); a memory change whose resizePolicy says
// RestartContainer restarts that container once; a resize that does not fit
// the node stays PodResizePending with reason Deferred and the admission's
// message, and the allocation (and the container) keep the old values.
func testInPlaceResize(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.extra = append(n.extra, noResyncDuringTest)
	n.createNamespace()
	n.start()
	n.waitNodeReady(90 * time.Second)
	n.applyYAML(n.boundPodYAML("rs", 1, `[sleep, "3600"]`,
		"resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 200m, memory: 128Mi}}",
		"resizePolicy: [{resourceName: cpu, restartPolicy: NotRequired}, {resourceName: memory, restartPolicy: NotRequired}]"))
	p := n.waitAPIPod("rs", podStartTimeout, "running with its resources reported", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return p.Status.Phase == v1.PodRunning && cs != nil && cs.Ready && cs.Resources != nil
	})
	before := containerStatus(p, "main")
	checkResourcesStatus(t, before, "100m", "64Mi", "200m", "128Mi")
	ids := n.containers(false, "io.kubernetes.pod.uid="+string(p.UID), "io.kubernetes.container.name=main")
	if len(ids) != 1 {
		t.Fatalf("running containers of rs/main: %v", ids)
	}

	n.kubectl("", "-n", n.ns, "patch", "pod", "rs", "--subresource", "resize", "-p",
		`{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"150m","memory":"64Mi"},"limits":{"cpu":"300m","memory":"192Mi"}}}]}}`)
	p = n.waitAPIPod("rs", 60*time.Second, "resized in place", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.Resources != nil && cs.Resources.Limits.Memory().Equal(resource.MustParse("192Mi")) &&
			cs.Resources.Limits.Cpu().Equal(resource.MustParse("300m")) && findCondition(p, v1.PodResizeInProgress) == nil &&
			findCondition(p, v1.PodResizePending) == nil
	})
	after := containerStatus(p, "main")
	checkResourcesStatus(t, after, "150m", "64Mi", "300m", "192Mi")
	if after.RestartCount != 0 || after.ContainerID != before.ContainerID {
		t.Errorf("resize restarted the container: restart count %d, ID %s (was %s)", after.RestartCount, after.ContainerID, before.ContainerID)
	}
	if got := n.dockerHostConfig(ids[0], "{{.HostConfig.Memory}} {{.HostConfig.CpuQuota}} {{.HostConfig.CpuShares}}"); got != fmt.Sprintf("%d 30000 153", 192<<20) {
		t.Errorf("Docker's memory, cpu quota and shares of the container: %s, want %d 30000 153", got, 192<<20)
	}
	podCgroup := n.cgroupRoot + "/kubepods/burstable/pod" + string(p.UID)
	if got := cgroupValue(t, "memory", podCgroup, "memory.limit_in_bytes"); got != strconv.Itoa(192<<20) {
		t.Errorf("pod cgroup memory.limit_in_bytes = %s, want %d", got, 192<<20)
	}
	if got := cgroupValue(t, "cpu", podCgroup, "cpu.cfs_quota_us"); got != "30000" {
		t.Errorf("pod cgroup cpu.cfs_quota_us = %s, want 30000", got)
	}
	if got := cgroupValue(t, "cpu", podCgroup, "cpu.shares"); got != "153" {
		t.Errorf("pod cgroup cpu.shares = %s, want 153", got)
	}
	n.waitEvent(p, "ResizeCompleted", `Pod resize completed: {"containers":[{"name":"main","resources":{"limits":{"cpu":"300m","memory":"192Mi"},"requests":{"cpu":"150m","memory":"64Mi"}}}],"generation":2}`)

	// More cpu than is left beside another pod: Deferred, nothing changes;
	// retried and accepted once that pod is gone.
	node, err := n.apiNode()
	if err != nil {
		t.Fatal(err)
	}
	alloc := node.Status.Allocatable.Cpu().MilliValue()
	n.applyYAML(n.boundPodYAML("hog", 1, `[sleep, "3600"]`, fmt.Sprintf("resources: {requests: {cpu: %dm}}", alloc-400)))
	hog := n.waitAPIPod("hog", podStartTimeout, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	n.kubectl("", "-n", n.ns, "patch", "pod", "rs", "--subresource", "resize", "-p",
		`{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"500m"},"limits":{"cpu":"500m"}}}]}}`)
	p = n.waitAPIPod("rs", 60*time.Second, "resize deferred", func(p *v1.Pod) bool {
		return findCondition(p, v1.PodResizePending) != nil
	})
	pending := findCondition(p, v1.PodResizePending)
	wantMsg := fmt.Sprintf("Node didn't have enough resource: cpu, requested: 500, used: %d, capacity: %d", alloc-400, alloc)
	if pending.Reason != "Deferred" || pending.Message != wantMsg || pending.ObservedGeneration != p.Generation {
		t.Errorf("PodResizePending = %+v, want reason Deferred, message %q and generation %d", pending, wantMsg, p.Generation)
	}
	if cs := containerStatus(p, "main"); !cs.AllocatedResources.Cpu().Equal(resource.MustParse("150m")) || cs.RestartCount != 0 {
		t.Errorf("after a deferred resize: allocated cpu %s, restart count %d; want 150m, 0", cs.AllocatedResources.Cpu(), cs.RestartCount)
	}
	n.waitEvent(p, "ResizeDeferred", "Pod resize OutOfcpu: ")
	n.kubectl("", "-n", n.ns, "delete", "pod", "hog", "--wait=false")
	n.waitAPIPodGone("hog", string(hog.UID), 60*time.Second)
	p = n.waitAPIPod("rs", 60*time.Second, "deferred resize accepted once the other pod went", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return findCondition(p, v1.PodResizePending) == nil && findCondition(p, v1.PodResizeInProgress) == nil &&
			cs != nil && cs.Resources != nil && cs.Resources.Limits.Cpu().Equal(resource.MustParse("500m"))
	})
	checkResourcesStatus(t, containerStatus(p, "main"), "500m", "64Mi", "500m", "192Mi")

	// RestartContainer for memory: that container restarts, once.
	n.applyYAML(n.boundPodYAML("rr", 1, `[sleep, "3600"]`,
		"resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}",
		"resizePolicy: [{resourceName: memory, restartPolicy: RestartContainer}]"))
	n.waitAPIPod("rr", podStartTimeout, "running", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.Ready
	})
	n.kubectl("", "-n", n.ns, "patch", "pod", "rr", "--subresource", "resize", "-p",
		`{"spec":{"containers":[{"name":"main","resources":{"requests":{"memory":"96Mi"},"limits":{"memory":"96Mi"}}}]}}`)
	rr := n.waitAPIPod("rr", 60*time.Second, "restarted with the new memory", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.Ready && cs.RestartCount == 1 && cs.Resources != nil && cs.Resources.Limits.Memory().Equal(resource.MustParse("96Mi"))
	})
	n.waitEvent(rr, "Killing", "Container main resize requires restart")
}

// findCondition returns the pod's condition of type typ (nil if missing).
func findCondition(p *v1.Pod, typ v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// checkResourcesStatus checks a running container's allocatedResources and
// resources.
func checkResourcesStatus(t *testing.T, cs *v1.ContainerStatus, reqCPU, reqMem, limCPU, limMem string) {
	t.Helper()
	eq := func(q *resource.Quantity, want string) bool { return q.Equal(resource.MustParse(want)) }
	if cs.Resources == nil || !eq(cs.Resources.Requests.Cpu(), reqCPU) || !eq(cs.Resources.Requests.Memory(), reqMem) ||
		!eq(cs.Resources.Limits.Cpu(), limCPU) || !eq(cs.Resources.Limits.Memory(), limMem) {
		t.Errorf("status resources = %+v, want requests %s/%s limits %s/%s", cs.Resources, reqCPU, reqMem, limCPU, limMem)
	}
	if !eq(cs.AllocatedResources.Cpu(), reqCPU) || !eq(cs.AllocatedResources.Memory(), reqMem) {
		t.Errorf("allocatedResources = %v, want %s/%s", cs.AllocatedResources, reqCPU, reqMem)
	}
}

// dockerHostConfig formats a container's inspect output.
func (n *clusterNode) dockerHostConfig(id, format string) string {
	n.t.Helper()
	out, err := n.s.dockerCLI(context.Background(), "inspect", "-f", format, id)
	if err != nil {
		n.t.Fatalf("docker inspect: %v: %s", err, out)
	}
	return strings.TrimSpace(out)
}

// waitEvent waits for an event of the pod with reason whose message starts
// with prefix.
func (n *clusterNode) waitEvent(p *v1.Pod, reason, prefix string) {
	n.t.Helper()
	n.poll(30*time.Second, fmt.Sprintf("event %s %q... of pod %s", reason, prefix, p.Name), func() (bool, string) {
		evs, err := n.c.Client.CoreV1().Events(p.Namespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.uid=" + string(p.UID) + ",reason=" + reason})
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, e := range evs.Items {
			if strings.HasPrefix(e.Message, prefix) {
				return true, ""
			}
			msgs = append(msgs, e.Message)
		}
		return false, strings.Join(msgs, " | ")
	})
}

// boundPodYAML is podYAML bound to this node (spec.nodeName): a pod left to
// the scheduler may land on a node an earlier case removed a moment ago, and
// the pod GC then deletes it.
func (n *clusterNode) boundPodYAML(name string, grace int, command string, containerFields ...string) string {
	return strings.Replace(podYAML(name, grace, command, containerFields...), "spec:\n", "spec:\n  nodeName: "+n.name+"\n", 1)
}
