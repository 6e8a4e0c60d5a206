//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/memorymanager/state"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// numaMeminfo gives writeNUMASysfs's nodes their memory: 2 GiB on node 0,
// 512 MiB on node 1 (this machine's one real node is 0).
var numaMeminfo = map[string]string{
	"devices/system/node/node0/meminfo": "Node 0 MemTotal:        2097152 kB",
	"devices/system/node/node1/meminfo": "Node 1 MemTotal:         524288 kB",
}

// testMemoryManager (issue 30 item 4): the Static memory manager on the
// fake 2-NUMA tree (node 0: 2 GiB, 612 MiB of it reserved, the
// systemReserved 512Mi plus the default hard eviction threshold 100Mi;
// node 1: 512 MiB), topology manager policy none.
//   - A Guaranteed pod of 1 GiB is pinned to node 0 (the narrowest node
//     that holds it): Docker gets CpusetMems "0", and memory_manager_state
//     records the block in upstream's format (its checksums verified).
//   - The PodResources API reports the block (memory, 1Gi, node 0) for the
//     container and the allocatable memory of each node.
//   - A second one fits on no single node, and node 0 may not join a group
//     while used alone: it is rejected with UnexpectedAdmissionError and
//     upstream's message.
//   - A Burstable pod is not pinned (no CpusetMems).
//   - Once the first pod is deleted, its memory is free again in the file.
//   - The pinning counters count the two Guaranteed admissions, one failed.
func testMemoryManager(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.env = append(n.env, "KUBELET_DOCKERSHIM_TEST_SYSFS="+writeNUMASysfs(t, n.dir, numaMeminfo))
	n.extra = append(n.extra, "--memory-manager-policy=Static", "--system-reserved=memory=512Mi", "--reserved-memory=0:memory=612Mi")
	n.start()
	n.waitNodeReady(90 * time.Second)

	file := state.File{Dir: n.rootDir}
	machine := func() state.State {
		t.Helper()
		st, found, err := file.Load("Static")
		if err != nil || !found {
			t.Fatalf("memory_manager_state: found %v, %v", found, err)
		}
		return st
	}
	const mi = 1 << 20
	if st := machine(); st.Machine[0].MemoryMap["memory"].Allocatable != (2048-612)*mi || st.Machine[1].MemoryMap["memory"].Allocatable != 512*mi {
		t.Fatalf("initial machine state: node 0 %+v, node 1 %+v", st.Machine[0].MemoryMap["memory"], st.Machine[1].MemoryMap["memory"])
	}

	pod := func(name, resources string) string {
		return n.boundPodYAML(name, 1, `[sh, -c, "sleep 3600"]`, "resources: "+resources)
	}
	n.applyYAML(pod("pinned", "{limits: {cpu: 100m, memory: 1Gi}}"))
	p := n.waitAPIPod("pinned", podStartTimeout, "running", runningAndReady)
	ids := n.containers(false, "io.kubernetes.pod.uid="+string(p.UID), "io.kubernetes.container.name=main")
	if len(ids) != 1 {
		t.Fatalf("containers of the pinned pod: %v", ids)
	}
	if got := n.dockerHostConfig(ids[0], "{{.HostConfig.CpusetMems}}"); got != "0" {
		t.Errorf("CpusetMems of the pinned container %q, want 0", got)
	}
	st := machine()
	if blocks := st.Blocks(string(p.UID), "main"); len(blocks) != 1 || blocks[0].Size != 1<<30 || len(blocks[0].NUMAAffinity) != 1 || blocks[0].NUMAAffinity[0] != 0 {
		t.Errorf("blocks of the pinned pod %+v", blocks)
	}
	if got := st.Machine[0].MemoryMap["memory"].Free; got != (2048-612-1024)*mi {
		t.Errorf("node 0 free %d after 1Gi pinned", got)
	}

	pr := n.podResources()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := pr.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: "pinned", PodNamespace: n.ns})
	if err != nil || len(got.PodResources.GetContainers()) != 1 {
		t.Fatalf("PodResources Get: %v %v", got, err)
	}
	if mem := got.PodResources.Containers[0].Memory; len(mem) != 1 || mem[0].MemoryType != "memory" || mem[0].Size != 1<<30 ||
		len(mem[0].Topology.GetNodes()) != 1 || mem[0].Topology.Nodes[0].ID != 0 {
		t.Errorf("PodResources memory of the pinned container: %v", mem)
	}
	alloc, err := pr.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var allocatable []string
	for _, m := range alloc.Memory {
		allocatable = append(allocatable, fmt.Sprintf("%s:%d@%d", m.MemoryType, m.Size, m.Topology.Nodes[0].ID))
	}
	if want := []string{fmt.Sprintf("memory:%d@0", (2048-612)*mi), fmt.Sprintf("memory:%d@1", 512*mi)}; !slices.Equal(allocatable, want) {
		t.Errorf("PodResources allocatable memory %v, want %v", allocatable, want)
	}

	n.applyYAML(pod("refused", "{limits: {cpu: 100m, memory: 1Gi}}"))
	r := n.waitAPIPod("refused", 60*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	want := "Pod was rejected: Allocate failed due to [memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available, which is unexpected"
	if r.Status.Reason != "UnexpectedAdmissionError" || r.Status.Message != want {
		t.Errorf("rejected pod status: %q %q", r.Status.Reason, r.Status.Message)
	}

	n.applyYAML(pod("burstable", "{requests: {cpu: 100m, memory: 64Mi}}"))
	b := n.waitAPIPod("burstable", podStartTimeout, "running", runningAndReady)
	if ids := n.containers(false, "io.kubernetes.pod.uid="+string(b.UID), "io.kubernetes.container.name=main"); len(ids) != 1 ||
		n.dockerHostConfig(ids[0], "{{.HostConfig.CpusetMems}}") != "" {
		t.Errorf("the Burstable pod's container is pinned (or missing): %v", ids)
	}

	body, code, err := n.get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, want := range []string{"kubelet_memory_manager_pinning_requests_total 2", "kubelet_memory_manager_pinning_errors_total 1"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	if err := c.Client.CoreV1().Pods(n.ns).Delete(context.Background(), "pinned", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.waitAPIPodGone("pinned", string(p.UID), 60*time.Second)
	n.poll(30*time.Second, "the pinned pod's memory released", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(n.rootDir, state.FileName))
		if err != nil {
			return false, err.Error()
		}
		st := machine()
		return st.Assignments[string(p.UID)] == nil && st.Machine[0].MemoryMap["memory"].Free == (2048-612)*mi, string(b)
	})
}
