package cpumanager

import (
	"testing"

	"go.uber.org/zap/zaptest"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
)

// On a fake sysfs tree of 2 NUMA nodes (CPUs 0-3 on node 0, 4-7 on node 1,
// CPU 0 reserved), the static policy's hints and the topology manager:
//   - a 2-CPU container's hints are each node (preferred) and both (not);
//   - a 5-CPU container fits on no single node: its narrowest hint is both
//     nodes, which only best-effort and restricted admit, and
//     single-numa-node refuses with TopologyAffinityError;
//   - with a 3-CPU container on node 0 first, a second 3-CPU container gets
//     node 1, its CPUs all there.
func TestTopologyManagerWithStaticCPUs(t *testing.T) {
	t.Parallel()
	cpus := make([]fakeCPU, 8)
	for i := range cpus {
		cpus[i] = fakeCPU{socket: i / 4, coreID: i}
	}
	root := writeSysfs(t, cpus, "0-7", map[int]string{0: "0-3", 1: "4-7"})
	newPair := func(policy string) (*Manager, *topologymanager.Manager) {
		m, err := New(Options{Policy: PolicyStatic, ReservedMilliCPU: 1000, StateDir: t.TempDir(), SysfsRoot: root, Logger: zaptest.NewLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.start(nil, nil); err != nil {
			t.Fatal(err)
		}
		tm, err := topologymanager.New(topologymanager.Options{Policy: policy, Scope: topologymanager.ScopeContainer,
			NUMANodes: m.Topology().CPUDetails.NUMANodes().List(), Providers: []topologymanager.HintProvider{m}})
		if err != nil {
			t.Fatal(err)
		}
		return m, tm
	}

	m, _ := newPair(topologymanager.PolicyRestricted)
	pod := makePod("two", nil, ctr("c", "2"))
	hints := m.TopologyHints(pod, &pod.Spec.Containers[0])["cpu"]
	want := []topologymanager.Hint{{Affinity: 1, Preferred: true}, {Affinity: 2, Preferred: true}, {Affinity: 3}}
	if len(hints) != len(want) || hints[0] != want[0] || hints[1] != want[1] || hints[2] != want[2] {
		t.Errorf("hints of 2 CPUs = %+v, want %+v", hints, want)
	}

	for policy, wantOK := range map[string]bool{topologymanager.PolicyBestEffort: true, topologymanager.PolicyRestricted: true, topologymanager.PolicySingleNUMANode: false} {
		_, tm := newPair(policy)
		big := makePod("big-"+policy, nil, ctr("c", "5"))
		reason, msg, ok := tm.Admit(big)
		if ok != wantOK || (!ok && (reason != "TopologyAffinityError" || msg != "Resources cannot be allocated with Topology locality")) {
			t.Errorf("%s: 5 CPUs admitted %v (%s: %s), want %v", policy, ok, reason, msg, wantOK)
		}
	}

	m, tm := newPair(topologymanager.PolicySingleNUMANode)
	first := makePod("first", nil, ctr("c", "3"))
	if _, _, ok := tm.Admit(first); !ok {
		t.Fatal("first pod refused")
	}
	second := makePod("second", nil, ctr("c", "3"))
	if reason, msg, ok := tm.Admit(second); !ok {
		t.Fatalf("second pod refused: %s %s", reason, msg)
	}
	a, _ := m.CPUSet("first", "c")
	b, _ := m.CPUSet("second", "c")
	node0, node1 := m.Topology().CPUDetails.CPUsInNUMANodes(0), m.Topology().CPUDetails.CPUsInNUMANodes(1)
	if !(a.IsSubsetOf(node0) && b.IsSubsetOf(node1)) && !(a.IsSubsetOf(node1) && b.IsSubsetOf(node0)) {
		t.Errorf("CPUs %s and %s are not each on one NUMA node", a, b)
	}
	third := makePod("third", nil, ctr("c", "2"))
	if reason, _, ok := tm.Admit(third); ok || reason != "TopologyAffinityError" {
		t.Errorf("a third pod with no node of 2 free CPUs: admitted %v (%s)", ok, reason)
	}
}
