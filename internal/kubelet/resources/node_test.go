package resources

import (
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// testMachine is a 4-CPU, 8Gi, 100Gi-disk machine.
func testMachine() Machine {
	return Machine{NumCPU: 4, MemoryCapacity: 8 * gi, RootFsCapacity: 100 * gi}
}

func quantityString(v int64) string { return resource.NewQuantity(v, resource.BinarySI).String() }

// checkList compares a resource list with wanted quantities, entry by entry.
func checkList(t *testing.T, what string, got v1.ResourceList, want map[v1.ResourceName]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for name, w := range want {
		if q := got[name]; q.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s %s = %s, want %s", what, name, q.String(), w)
		}
	}
}

func TestNodeAllocatable(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc           string
		eviction       map[string]string
		systemReserved v1.ResourceList
		kubeReserved   v1.ResourceList
		hugePages      map[int64]int64
		want           map[v1.ResourceName]string
	}{
		{
			desc: "no reservation",
			want: map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"},
		},
		{
			desc:           "reserved and eviction",
			eviction:       map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
			systemReserved: v1.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("100Mi")},
			kubeReserved:   v1.ResourceList{"cpu": resource.MustParse("200m"), "memory": resource.MustParse("200Mi"), "ephemeral-storage": resource.MustParse("1Gi")},
			// 8Gi - 400Mi = 7792Mi; 100Gi - 10Gi - 1Gi = 89Gi (10% of 100Gi as float32 math).
			want: map[v1.ResourceName]string{"cpu": "3700m", "memory": "7792Mi", "pods": "110",
				"ephemeral-storage": quantityString(100*gi - int64(float64(100*gi)*float64(float32(10)/100)) - gi)},
		},
		{
			desc:      "huge pages leave memory",
			hugePages: map[int64]int64{2 * mi: 512 * mi},
			want: map[v1.ResourceName]string{"cpu": "4", "memory": "7680Mi", "pods": "110", "ephemeral-storage": "100Gi",
				"hugepages-2Mi": "512Mi"},
		},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			m := testMachine()
			m.HugePages = test.hugePages
			n, err := New(Options{Machine: m, EvictionHard: test.eviction,
				SystemReserved: test.systemReserved, KubeReserved: test.kubeReserved})
			if err != nil {
				t.Fatal(err)
			}
			checkList(t, "allocatable", n.Allocatable(), test.want)
			checkList(t, "AllocatableOf(capacity)", n.AllocatableOf(n.Capacity()), test.want)
		})
	}
}

// TestReservationAboveCapacity: a reservation larger than the capacity stops
// the kubelet with upstream's message; the allocatable of a smaller capacity
// (another node object's) is never negative.
func TestReservationAboveCapacity(t *testing.T) {
	t.Parallel()
	_, err := New(Options{Machine: testMachine(), EvictionHard: map[string]string{"memory.available": "1Gi"},
		KubeReserved: v1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("8Gi")}})
	want := `invalid Node Allocatable configuration. Resource "cpu" has a reservation of 8 but capacity of 4. Expected capacity >= reservation. ` +
		`Resource "memory" has a reservation of 9Gi but capacity of 8Gi. Expected capacity >= reservation.`
	if err == nil || err.Error() != want {
		t.Fatalf("New = %v, want %q", err, want)
	}
	n, err := New(Options{Machine: testMachine(), KubeReserved: v1.ResourceList{"cpu": resource.MustParse("2"), "memory": resource.MustParse("6Gi")}})
	if err != nil {
		t.Fatal(err)
	}
	small := v1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("4Gi"), "pods": resource.MustParse("10")}
	checkList(t, "AllocatableOf(smaller capacity)", n.AllocatableOf(small), map[v1.ResourceName]string{"cpu": "0", "memory": "0", "pods": "10"})
}

func TestNodeCapacity(t *testing.T) {
	t.Parallel()
	m := testMachine()
	m.HugePages = map[int64]int64{2 * mi: 0, gi: 2 * gi}
	n, err := New(Options{Machine: m, MaxPods: 50})
	if err != nil {
		t.Fatal(err)
	}
	checkList(t, "capacity", n.Capacity(), map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "50",
		"ephemeral-storage": "100Gi", "hugepages-2Mi": "0", "hugepages-1Gi": "2Gi"})
	if got := n.Allocatable()[v1.ResourceMemory]; got.Cmp(resource.MustParse("6Gi")) != 0 {
		t.Errorf("allocatable memory = %s, want 6Gi", got.String())
	}
	// Callers get copies: changing one changes nothing.
	c := n.Capacity()
	c[v1.ResourceCPU] = resource.MustParse("64")
	if got := n.Capacity()[v1.ResourceCPU]; got.Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("capacity changed through a returned copy: cpu %s", got.String())
	}
	if n.Machine().NumCPU != 4 {
		t.Errorf("Machine() = %+v", n.Machine())
	}
	if _, err := New(Options{Machine: m, EvictionHard: map[string]string{"x": "1"}}); err == nil {
		t.Error("New with an unknown eviction signal: no error")
	}
}

func TestNodeSetExtendedCapacity(t *testing.T) {
	t.Parallel()
	n, err := New(Options{Machine: testMachine(), KubeReserved: v1.ResourceList{"example.com/dongle": resource.MustParse("1")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.SetExtendedCapacity(v1.ResourceList{"example.com/dongle": resource.MustParse("3")}); err != nil {
		t.Fatal(err)
	}
	base := map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "110", "ephemeral-storage": "100Gi"}
	with := func(extra map[v1.ResourceName]string) map[v1.ResourceName]string {
		out := map[v1.ResourceName]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	checkList(t, "capacity", n.Capacity(), with(map[v1.ResourceName]string{"example.com/dongle": "3"}))
	checkList(t, "allocatable", n.Allocatable(), with(map[v1.ResourceName]string{"example.com/dongle": "2"}))
	// The set replaces the previous one.
	if err := n.SetExtendedCapacity(nil); err != nil {
		t.Fatal(err)
	}
	checkList(t, "capacity after removal", n.Capacity(), base)
	for _, name := range []v1.ResourceName{"cpu", "hugepages-2Mi", "kubernetes.io/x", "requests.example.com/y", "plain"} {
		if err := n.SetExtendedCapacity(v1.ResourceList{name: resource.MustParse("1")}); err == nil {
			t.Errorf("SetExtendedCapacity(%s): no error", name)
		}
	}
	checkList(t, "capacity after refusals", n.Capacity(), base)
}

// TestNodeConcurrentReaders reads while the capacity changes (run with -race).
func TestNodeConcurrentReaders(t *testing.T) {
	t.Parallel()
	n, err := New(Options{Machine: testMachine()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 200 {
				if i == 0 {
					_ = n.SetExtendedCapacity(v1.ResourceList{"example.com/d": *resource.NewQuantity(int64(j), resource.DecimalSI)})
					continue
				}
				if q := n.Allocatable()[v1.ResourceCPU]; q.Cmp(resource.MustParse("4")) != 0 {
					t.Errorf("allocatable cpu = %s", q.String())
					return
				}
			}
		})
	}
	wg.Wait()
}
