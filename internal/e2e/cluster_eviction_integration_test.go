//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// evictedMessagePrefix starts the status message of a pod evicted for
// pressure on a resource (upstream's).
func evictedMessagePrefix(resource string) string {
	return "The node was low on resource: " + resource + ". Threshold quantity: "
}

// isFailedEvicted: the pod ended Failed with reason Evicted.
func isFailedEvicted(p *v1.Pod) bool {
	return p.Status.Phase == v1.PodFailed && p.Status.Reason == "Evicted"
}

// checkDisruptionTarget fails unless the pod carries (want) or lacks the
// DisruptionTarget condition of a kubelet eviction.
func checkDisruptionTarget(t *testing.T, p *v1.Pod, want bool) {
	t.Helper()
	var cond *v1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == v1.DisruptionTarget {
			cond = &p.Status.Conditions[i]
		}
	}
	switch {
	case !want && cond != nil:
		t.Errorf("pod %s: unexpected DisruptionTarget condition %+v", p.Name, cond)
	case want && (cond == nil || cond.Status != v1.ConditionTrue || cond.Reason != "TerminationByKubelet" || cond.Message != p.Status.Message):
		t.Errorf("pod %s: DisruptionTarget condition %+v, want True / TerminationByKubelet / the status message", p.Name, cond)
	}
}

// waitNodeCondition waits until the node's condition typ has status.
func (n *clusterNode) waitNodeCondition(typ v1.NodeConditionType, status v1.ConditionStatus, timeout time.Duration) {
	n.t.Helper()
	n.poll(timeout, fmt.Sprintf("node condition %s=%s", typ, status), func() (bool, string) {
		node, err := n.apiNode()
		if err != nil {
			return false, err.Error()
		}
		c := nodeCondition(node, typ)
		return c != nil && c.Status == status, fmt.Sprintf("%+v", c)
	})
}

// waitTaint waits until the node has (present) or lacks the NoSchedule taint key.
func (n *clusterNode) waitTaint(key string, present bool, timeout time.Duration) {
	n.t.Helper()
	n.poll(timeout, fmt.Sprintf("taint %s present=%v", key, present), func() (bool, string) {
		node, err := n.apiNode()
		if err != nil {
			return false, err.Error()
		}
		has := false
		for _, t := range node.Spec.Taints {
			has = has || (t.Key == key && t.Effect == v1.TaintEffectNoSchedule)
		}
		return has == present, fmt.Sprintf("%+v", node.Spec.Taints)
	})
}

// checkEvictedEvent fails unless the pod has a Warning Evicted event with the
// status message and (when resource is not "") upstream's annotations.
func (n *clusterNode) checkEvictedEvent(p *v1.Pod, resource string) {
	n.t.Helper()
	n.poll(30*time.Second, "the Evicted event of "+p.Name, func() (bool, string) {
		evs, err := n.c.Client.CoreV1().Events(p.Namespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.uid=" + string(p.UID) + ",reason=Evicted"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Type != v1.EventTypeWarning || e.Message != p.Status.Message {
				continue
			}
			if resource == "" || e.Annotations["starved_resource"] == resource {
				return true, ""
			}
			return false, fmt.Sprintf("annotations %v", e.Annotations)
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
}

// testEviction (issue 13): on a node with "pods" enforced and a large
// --system-reserved (its kubepods cgroup gets 700Mi), the allocatable memory
// threshold copied from --eviction-hard=memory.available<300Mi evicts a pod
// that allocates 480Mi, while a Guaranteed neighbour keeps running; the
// kernel memcg notification catches the leak between samples. The node
// reports MemoryPressure, the controller-manager taints it, BestEffort pods
// are refused meanwhile, and both go once the transition period passed.
// Before that, a pod writing past its emptyDir sizeLimit is evicted and its
// data freed.
func testEviction(t *testing.T, c *controlplane.Cluster) {
	memTotal := machineMemory(t)
	n := newClusterNode(t, c)
	n.createNamespace()
	n.extra = append(n.extra, fmt.Sprintf("--system-reserved=memory=%d", memTotal-700<<20),
		"--eviction-hard=memory.available<300Mi", "--enforce-node-allocatable=pods",
		"--kernel-memcg-notification", "--eviction-pressure-transition-period=45s")
	n.start()
	n.waitNodeReady(90 * time.Second)

	checkEmptyDirEviction(t, n)

	n.applyYAML(n.boundPodYAML("neighbour", 2, `["sleep", "3600"]`,
		"resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}"))
	n.waitAPIPod("neighbour", podStartTimeout, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	n.applyYAML(n.boundPodYAML("leak", 2, `["sh", "-c", "(head -c 480m /dev/zero; sleep 3600) | tail"]`))
	leak := n.waitAPIPod("leak", 2*time.Minute, "evicted", isFailedEvicted)
	if !strings.HasPrefix(leak.Status.Message, evictedMessagePrefix("memory")+"300Mi, available: ") {
		t.Errorf("evicted pod message %q, want %q...", leak.Status.Message, evictedMessagePrefix("memory")+"300Mi")
	}
	checkDisruptionTarget(t, leak, true)
	n.logReactionTime(leak)
	// The kernel's memcg notification woke the manager (the leak crossed
	// the kubepods cgroup's trigger between two samples).
	n.waitLogLine("eviction manager: hard allocatable memory eviction threshold crossed", 5*time.Second)

	// Under memory pressure (the condition on the Node, the controller-manager's
	// taint) a BestEffort pod is refused, a Burstable one not.
	n.waitNodeCondition(v1.NodeMemoryPressure, v1.ConditionTrue, 15*time.Second)
	n.waitTaint(v1.TaintNodeMemoryPressure, true, 20*time.Second)
	n.applyYAML(n.boundPodYAML("late-besteffort", 2, `["sleep", "3600"]`))
	n.applyYAML(n.boundPodYAML("late-burstable", 2, `["sleep", "3600"]`, "resources: {requests: {memory: 8Mi}}"))
	late := n.waitAPIPod("late-besteffort", 30*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if want := "Pod was rejected: The node had condition: [MemoryPressure]. "; late.Status.Reason != "Evicted" || late.Status.Message != want {
		t.Errorf("pod admitted under memory pressure: reason %q message %q, want Evicted / %q", late.Status.Reason, late.Status.Message, want)
	}
	n.waitAPIPod("late-burstable", podStartTimeout, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	n.checkEvictedEvent(leak, "memory")
	n.poll(20*time.Second, "kubelet_evictions{allocatableMemory.available} = 1", func() (bool, string) {
		v, err := n.metric(`kubelet_evictions{eviction_signal="allocatableMemory.available"}`)
		return err == nil && v == 1, fmt.Sprint(v, err)
	})
	if p, err := n.apiPod("neighbour"); err != nil || p.Status.Phase != v1.PodRunning {
		t.Errorf("the Guaranteed neighbour did not keep running: %v %v", err, p.Status)
	}

	// The pressure is gone: the condition ends after the transition period,
	// and the controller-manager removes the taint.
	n.waitNodeCondition(v1.NodeMemoryPressure, v1.ConditionFalse, 90*time.Second)
	n.waitTaint(v1.TaintNodeMemoryPressure, false, 60*time.Second)
}

// checkEmptyDirEviction: a pod writing 16Mi into an emptyDir of sizeLimit
// 4Mi is evicted with upstream's message (no DisruptionTarget: local storage
// evictions set none) and its emptyDir is removed.
func checkEmptyDirEviction(t *testing.T, n *clusterNode) {
	n.applyYAML(strings.Replace(n.boundPodYAML("scratch", 2, `["sh", "-c", "dd if=/dev/zero of=/cache/f bs=1M count=16; sleep 3600"]`,
		"resources: {requests: {memory: 8Mi}}", "volumeMounts: [{name: cache, mountPath: /cache}]"),
		"  containers:\n", "  volumes: [{name: cache, emptyDir: {sizeLimit: 4Mi}}]\n  containers:\n", 1))
	p := n.waitAPIPod("scratch", 3*time.Minute, "evicted", isFailedEvicted)
	if want := `Usage of EmptyDir volume "cache" exceeds the limit "4Mi". `; p.Status.Message != want {
		t.Errorf("emptyDir eviction message %q, want %q", p.Status.Message, want)
	}
	checkDisruptionTarget(t, p, false)
	n.checkEvictedEvent(p, "")
	dir := filepath.Join(n.rootDir, "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", "cache")
	n.poll(60*time.Second, "the evicted pod's emptyDir removed", func() (bool, string) {
		_, err := os.Stat(dir)
		return os.IsNotExist(err), fmt.Sprintf("stat %s: %v", dir, err)
	})
	n.poll(20*time.Second, "kubelet_evictions{emptydirfs.limit} = 1", func() (bool, string) {
		v, err := n.metric(`kubelet_evictions{eviction_signal="emptydirfs.limit"}`)
		return err == nil && v == 1, fmt.Sprint(v, err)
	})
}

// logReactionTime logs how long the evicted pod's container ran: its
// allocation takes well under a second, so this is the eviction's reaction
// time to a fast leak (issue 13 asks for it in the note).
func (n *clusterNode) logReactionTime(p *v1.Pod) {
	n.t.Helper()
	if len(p.Status.ContainerStatuses) == 0 {
		return
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "docker://")
	out, err := n.s.dockerCLI(context.Background(), "inspect", "-f", "{{.State.StartedAt}} {{.State.FinishedAt}}", id)
	times := strings.Fields(out)
	if err != nil || len(times) != 2 {
		n.t.Logf("eviction reaction: container %s already removed (%v)", id, err)
		return
	}
	started, err1 := time.Parse(time.RFC3339Nano, times[0])
	finished, err2 := time.Parse(time.RFC3339Nano, times[1])
	if err1 == nil && err2 == nil {
		n.t.Logf("eviction reaction: the leaking container ran %s (start, 480Mi allocated, killed)", finished.Sub(started).Round(time.Millisecond))
	}
}

// machineMemory is MemTotal in bytes (the node's memory capacity).
func machineMemory(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

// pidAvailable is the node's pid.available now: min(pid_max, threads-max)
// less the tasks /proc/loadavg counts.
func pidAvailable(t *testing.T) int64 {
	t.Helper()
	readInt := func(path string, field int) int64 {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(string(b))
		if field >= len(f) {
			t.Fatalf("%s: %q", path, b)
		}
		s := f[field]
		if _, after, ok := strings.Cut(s, "/"); ok {
			s = after
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return min(readInt("/proc/sys/kernel/pid_max", 0), readInt("/proc/sys/kernel/threads-max", 0)) - readInt("/proc/loadavg", 3)
}

// testPIDPressure (issue 13): with pid.available's threshold 1500 below what
// is available when the node starts, a pod that forks 3000 processes
// crosses it: the node reports PIDPressure (and the controller-manager taints
// it), the pod with the most processes is evicted with upstream's message
// (no container details for pids) and the other pod keeps running.
func testPIDPressure(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	threshold := pidAvailable(t) - 1500
	n.extra = append(n.extra, fmt.Sprintf("--eviction-hard=pid.available<%d", threshold), "--eviction-pressure-transition-period=20s")
	n.start()
	n.waitNodeReady(90 * time.Second)
	n.applyYAML(n.boundPodYAML("quiet", 2, `["sleep", "3600"]`, "resources: {requests: {memory: 8Mi}}"))
	n.waitAPIPod("quiet", podStartTimeout, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	n.applyYAML(n.boundPodYAML("forker", 2, `["sh", "-c", "i=0; while [ $i -lt 3000 ]; do sleep 3600 & i=$((i+1)); done; wait"]`,
		"resources: {requests: {memory: 8Mi}}"))
	forker := n.waitAPIPod("forker", 2*time.Minute, "evicted", isFailedEvicted)
	want := fmt.Sprintf("The node was low on resource: pids. Threshold quantity: %d, available: ", threshold)
	if !strings.HasPrefix(forker.Status.Message, want) || strings.Contains(forker.Status.Message, "Container ") {
		t.Errorf("evicted pod message %q, want %q... without container details", forker.Status.Message, want)
	}
	checkDisruptionTarget(t, forker, true)
	n.checkEvictedEvent(forker, "pids")
	n.waitNodeCondition(v1.NodePIDPressure, v1.ConditionTrue, 15*time.Second)
	n.waitTaint(v1.TaintNodePIDPressure, true, 20*time.Second)
	if p, err := n.apiPod("quiet"); err != nil || p.Status.Phase != v1.PodRunning {
		t.Errorf("the pod with one process did not keep running: %v %v", err, p.Status)
	}
	n.poll(20*time.Second, "kubelet_evictions{pid.available} = 1", func() (bool, string) {
		v, err := n.metric(`kubelet_evictions{eviction_signal="pid.available"}`)
		return err == nil && v == 1, fmt.Sprint(v, err)
	})
}
