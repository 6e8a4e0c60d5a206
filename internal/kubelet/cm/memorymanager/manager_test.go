package memorymanager

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/memorymanager/state"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
)

const gi = 1 << 30

// twoNodes: 8 GiB per node, node 0 with 2 GiB of 2 MiB huge pages.
func twoNodes() []NUMANode {
	return []NUMANode{
		{ID: 0, MemoryBytes: 8 * gi, HugePages: []HugePages{{PageSizeKiB: 2048, Pages: 1024}}},
		{ID: 1, MemoryBytes: 8 * gi},
	}
}

func reservation(memory string) v1.ResourceList {
	return v1.ResourceList{v1.ResourceMemory: resource.MustParse(memory)}
}

func reservedOn(node int32, memory string) []kubeletv1beta1.MemoryReservation {
	return []kubeletv1beta1.MemoryReservation{{NumaNode: node, Limits: reservation(memory)}}
}

func newStatic(t *testing.T, dir string, active func() []*v1.Pod) *Manager {
	t.Helper()
	m, err := New(Options{Policy: PolicyStatic, Nodes: twoNodes(), NodeReservation: reservation("1Gi"), ReservedMemory: reservedOn(0, "1Gi"),
		StateDir: dir, ActivePods: active, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return m
}

func guaranteed(uid, name string, memory string) *v1.Pod {
	rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse(memory)}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "ns"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: name, Resources: v1.ResourceRequirements{Requests: rl, Limits: rl}}}}}
}

func TestNewValidates(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		opts    Options
		wantErr string
	}{
		{"unknown policy", Options{Policy: "static"}, `unknown policy: "static"`},
		{"no reservation", Options{Policy: PolicyStatic, Nodes: twoNodes()}, "[memorymanager] you should specify the system reserved memory"},
		{"sum differs", Options{Policy: PolicyStatic, Nodes: twoNodes(), NodeReservation: reservation("1100Mi"), ReservedMemory: reservedOn(0, "1Gi")},
			`the total amount "1Gi" of type "memory" is not equal to the value "1100Mi" determined by Node Allocatable feature`},
		{"reserved without reservation", Options{Policy: PolicyStatic, Nodes: twoNodes(), ReservedMemory: reservedOn(1, "1Gi")},
			`the total amount "1Gi" of type "memory" is not equal to the value "0" determined by Node Allocatable feature`},
		{"no such node", Options{Policy: PolicyStatic, Nodes: twoNodes(), NodeReservation: reservation("1Gi"), ReservedMemory: reservedOn(2, "1Gi")},
			"the reserved memory configuration references a NUMA node 2 that does not exist on this machine"},
		{"no NUMA node", Options{Policy: PolicyStatic}, "[memorymanager] no NUMA node found in sysfs (devices/system/node)"},
		{"none", Options{Policy: PolicyNone}, ""},
		{"split over nodes", Options{Policy: PolicyStatic, Nodes: twoNodes(), NodeReservation: reservation("1Gi"),
			ReservedMemory: []kubeletv1beta1.MemoryReservation{{NumaNode: 0, Limits: reservation("512Mi")}, {NumaNode: 1, Limits: reservation("512Mi")}}}, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			tc.opts.StateDir = t.TempDir()
			_, err := New(tc.opts)
			if got := ""; err != nil {
				got = err.Error()
				if got != tc.wantErr {
					t.Fatalf("New error %q, want %q", got, tc.wantErr)
				}
			} else if tc.wantErr != "" {
				t.Fatalf("New: no error, want %q", tc.wantErr)
			}
		})
	}
}

func TestStartWritesUpstreamDefaultState(t *testing.T) {
	dir := t.TempDir()
	m := newStatic(t, dir, nil)
	st := m.State()
	want := state.NUMANodeMap{
		0: {Cells: []int{0}, MemoryMap: map[v1.ResourceName]*state.MemoryTable{
			"hugepages-2Mi": {TotalMemSize: 2 * gi, Allocatable: 2 * gi, Free: 2 * gi},
			"memory":        {TotalMemSize: 8 * gi, SystemReserved: gi, Allocatable: 5 * gi, Free: 5 * gi},
		}},
		1: {Cells: []int{1}, MemoryMap: map[v1.ResourceName]*state.MemoryTable{
			"memory": {TotalMemSize: 8 * gi, Allocatable: 8 * gi, Free: 8 * gi},
		}},
	}
	if !reflect.DeepEqual(st.Machine, want) {
		t.Fatalf("machine state %+v", st.Machine)
	}
	onDisk, found, err := state.File{Dir: dir}.Load(PolicyStatic)
	if err != nil || !found || !reflect.DeepEqual(onDisk.Machine, want) {
		t.Fatalf("state file: %+v found %v, %v", onDisk, found, err)
	}
	// None writes its (empty) state too, and refuses a Static file.
	none, err := New(Options{Policy: PolicyNone, StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := none.Start(context.Background()); err == nil || !strings.Contains(err.Error(), `configured policy "None" differs from state checkpoint policy "Static"`) {
		t.Fatalf("None over a Static file: %v", err)
	}
	none, _ = New(Options{Policy: PolicyNone, StateDir: t.TempDir()})
	if err := none.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, found, err := (state.File{Dir: none.file.Dir}).Load(PolicyNone); !found || err != nil {
		t.Fatalf("None wrote no state: found %v, %v", found, err)
	}
}

func TestAllocateSingleAndCrossNUMA(t *testing.T) {
	var active []*v1.Pod
	m := newStatic(t, t.TempDir(), func() []*v1.Pod { return active })
	small := guaranteed("small", "c", "2Gi")
	big := guaranteed("big", "c", "10Gi")
	active = []*v1.Pod{small, big}

	hints := m.TopologyHints(small, &small.Spec.Containers[0])
	want := []topologymanager.Hint{{Affinity: 0b01, Preferred: true}, {Affinity: 0b10, Preferred: true}, {Affinity: 0b11}}
	if !reflect.DeepEqual(hints["memory"], want) {
		t.Fatalf("hints of 2Gi %+v, want %+v", hints, want)
	}
	// Topology manager policy none: the best of the policy's own hints.
	if err := m.AllocateAligned(small, &small.Spec.Containers[0], topologymanager.Hint{}); err != nil {
		t.Fatal(err)
	}
	if got := m.NUMANodes("small", "c"); !reflect.DeepEqual(got, []int{0}) {
		t.Fatalf("NUMA nodes of small %v, want [0]", got)
	}
	// 10Gi holds on both nodes only; node 0 is used alone: no cross-NUMA hint.
	if hints := m.TopologyHints(big, &big.Spec.Containers[0]); len(hints["memory"]) != 0 {
		t.Fatalf("hints of 10Gi beside a single-NUMA block: %+v", hints)
	}
	err := m.AllocateAligned(big, &big.Spec.Containers[0], topologymanager.Hint{Affinity: 0b11})
	if err == nil || err.Error() != "[memorymanager] preferred hint violates NUMA node allocation" {
		t.Fatalf("cross-NUMA over a single-NUMA node: %v", err)
	}
	// Once small is gone (no longer active), node 1 alone is widened to
	// both nodes (the narrowest that hold 10Gi, so still preferred).
	active = []*v1.Pod{big}
	if err := m.AllocateAligned(big, &big.Spec.Containers[0], topologymanager.Hint{Affinity: 0b10, Preferred: true}); err != nil {
		t.Fatal(err)
	}
	st := m.State()
	if got := m.NUMANodes("big", "c"); !reflect.DeepEqual(got, []int{0, 1}) {
		t.Fatalf("NUMA nodes of big %v", got)
	}
	n0, n1 := st.Machine[0].MemoryMap["memory"], st.Machine[1].MemoryMap["memory"]
	if n0.Reserved != 5*gi || n0.Free != 0 || n1.Reserved != 5*gi || n1.Free != 3*gi || !reflect.DeepEqual(st.Machine[1].Cells, []int{0, 1}) {
		t.Fatalf("machine after a 10Gi cross-NUMA block: %+v %+v cells %v", n0, n1, st.Machine[1].Cells)
	}
	cfg := &runtimeapi.ContainerConfig{}
	m.PreCreateContainer(big, &big.Spec.Containers[0], cfg)
	if cfg.Linux.Resources.CpusetMems != "0,1" {
		t.Fatalf("cpuset_mems %q, want 0,1", cfg.Linux.Resources.CpusetMems)
	}
	if !m.HoldsPod("big") {
		t.Fatal("HoldsPod(big) = false")
	}
	if err := m.RemovePod("big"); err != nil {
		t.Fatal(err)
	}
	st = m.State()
	if !reflect.DeepEqual(st.Machine, newStatic(t, t.TempDir(), nil).State().Machine) || m.HoldsPod("big") {
		t.Fatalf("machine after release %+v", st.Machine)
	}
}

func TestNotPinned(t *testing.T) {
	m := newStatic(t, t.TempDir(), nil)
	burstable := guaranteed("b", "c", "1Gi")
	burstable.Spec.Containers[0].Resources.Limits = nil
	if hints := m.TopologyHints(burstable, &burstable.Spec.Containers[0]); hints != nil {
		t.Fatalf("hints of a Burstable pod %+v", hints)
	}
	if err := m.AllocateAligned(burstable, &burstable.Spec.Containers[0], topologymanager.Hint{}); err != nil || m.HoldsPod("b") {
		t.Fatalf("Burstable pod pinned: %v", err)
	}
	cfg := &runtimeapi.ContainerConfig{}
	m.PreCreateContainer(burstable, &burstable.Spec.Containers[0], cfg)
	if cfg.Linux != nil {
		t.Fatalf("cpuset_mems set for an unpinned container: %+v", cfg.Linux)
	}
}

func TestInitContainerMemoryReused(t *testing.T) {
	m := newStatic(t, t.TempDir(), nil)
	pod := guaranteed("p", "app", "2Gi")
	initRL := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("3Gi")}
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Resources: v1.ResourceRequirements{Requests: initRL, Limits: initRL}}}
	if req, _ := podRequests(pod); req["memory"] != 3*gi {
		t.Fatalf("pod request %v, want 3Gi (the init container's)", req)
	}
	for _, c := range []*v1.Container{&pod.Spec.InitContainers[0], &pod.Spec.Containers[0]} {
		if err := m.AllocateAligned(pod, c, topologymanager.Hint{Affinity: 0b01, Preferred: true}); err != nil {
			t.Fatal(err)
		}
	}
	st := m.State()
	if got := st.Machine[0].MemoryMap["memory"].Reserved; got != 3*gi {
		t.Fatalf("reserved %d, want 3Gi: the app container reuses the init container's memory", got)
	}
	if got := st.Blocks("p", "init")[0].Size; got != gi {
		t.Fatalf("init block %d, want 1Gi (2Gi reused by the app container)", got)
	}
	m.PreStartContainer(pod, &pod.Spec.Containers[0], "id")
	st = m.State()
	if st.Blocks("p", "init") != nil || st.Machine[0].MemoryMap["memory"].Reserved != 2*gi {
		t.Fatalf("after the app container started: init %v, reserved %d", st.Blocks("p", "init"), st.Machine[0].MemoryMap["memory"].Reserved)
	}
}

func TestRestartValidatesState(t *testing.T) {
	dir := t.TempDir()
	m := newStatic(t, dir, nil)
	pod := guaranteed("p", "c", "1Gi")
	if err := m.AllocateAligned(pod, &pod.Spec.Containers[0], topologymanager.Hint{}); err != nil {
		t.Fatal(err)
	}
	again := newStatic(t, dir, nil)
	if !reflect.DeepEqual(again.State(), m.State()) {
		t.Fatalf("restored %+v, want %+v", again.State(), m.State())
	}
	if hints := again.TopologyHints(pod, &pod.Spec.Containers[0]); !reflect.DeepEqual(hints["memory"], []topologymanager.Hint{{Affinity: 0b01, Preferred: true}}) {
		t.Fatalf("regenerated hints %+v", hints)
	}
	// The same file on a machine with less memory does not add up.
	smaller, err := New(Options{Policy: PolicyStatic, Nodes: []NUMANode{{ID: 0, MemoryBytes: 4 * gi}, {ID: 1, MemoryBytes: 8 * gi}},
		NodeReservation: reservation("1Gi"), ReservedMemory: reservedOn(0, "1Gi"), StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := smaller.Start(context.Background()); err == nil || err.Error() != "start memory manager error: [memorymanager] the expected machine state is different from the real one" {
		t.Fatalf("Start on another machine: %v", err)
	}
}

func TestReadNUMANodes(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("devices/system/node/node1/meminfo", "Node 1 MemTotal:        8388608 kB\nNode 1 MemFree:  1 kB\n")
	write("devices/system/node/node0/meminfo", "Node 0 MemTotal:        4194304 kB\n")
	write("devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages", "16\n")
	write("devices/system/node/node0/hugepages/hugepages-1048576kB/nr_hugepages", "0\n")
	write("devices/system/node/online", "0-1\n")
	nodes, err := ReadNUMANodes(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []NUMANode{
		{ID: 0, MemoryBytes: 4 * gi, HugePages: []HugePages{{PageSizeKiB: 1048576}, {PageSizeKiB: 2048, Pages: 16}}},
		{ID: 1, MemoryBytes: 8 * gi},
	}
	if !reflect.DeepEqual(nodes, want) {
		t.Fatalf("nodes %+v, want %+v", nodes, want)
	}
	if nodes, err := ReadNUMANodes(t.TempDir()); nodes != nil || err != nil {
		t.Fatalf("no node directory: %v, %v", nodes, err)
	}
}

// TestReadNUMANodesOfThisMachine reads the real /sys: every node directory
// is a node with some memory, none more than the machine's (a node may hold
// less than its share: on some virtual machines the nodes' MemTotal does not
// add up to /proc/meminfo's).
func TestReadNUMANodesOfThisMachine(t *testing.T) {
	dirs, err := filepath.Glob("/sys/devices/system/node/node[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := ReadNUMANodes("/sys")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != len(dirs) || len(nodes) == 0 {
		t.Fatalf("nodes %+v for directories %v", nodes, dirs)
	}
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	var totalKB uint64
	for _, line := range strings.Split(string(meminfo), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
			totalKB, _ = strconv.ParseUint(f[1], 10, 64)
		}
	}
	for _, n := range nodes {
		if n.MemoryBytes == 0 || n.MemoryBytes > totalKB*1024 {
			t.Errorf("node %d: %d bytes of memory, machine %d kB", n.ID, n.MemoryBytes, totalKB)
		}
	}
}
