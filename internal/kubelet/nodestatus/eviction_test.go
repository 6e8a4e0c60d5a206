package nodestatus

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestParseThresholds(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc    string
		in      map[string]string
		want    map[string]int64 // signal -> value for a capacity of 1000
		wantErr bool
	}{
		{desc: "nil", in: nil, want: map[string]int64{}},
		{
			desc: "upstream defaults",
			in: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%",
				"nodefs.inodesFree": "5%", "imagefs.available": "15%"},
			want: map[string]int64{"memory.available": 100 * mi, "nodefs.available": 100,
				"nodefs.inodesFree": 50, "imagefs.available": 150},
		},
		{desc: "0% and 100% disable", in: map[string]string{"memory.available": "0%", "nodefs.available": "100%"}, want: map[string]int64{}},
		{desc: "fraction percent", in: map[string]string{"pid.available": "2.5%"}, want: map[string]int64{"pid.available": 25}},
		{desc: "unknown signal", in: map[string]string{"cpu.available": "1"}, wantErr: true},
		{desc: "negative percent", in: map[string]string{"memory.available": "-1%"}, wantErr: true},
		{desc: "percent over 100", in: map[string]string{"memory.available": "101%"}, wantErr: true},
		{desc: "zero quantity", in: map[string]string{"memory.available": "0"}, wantErr: true},
		{desc: "negative quantity", in: map[string]string{"memory.available": "-1Mi"}, wantErr: true},
		{desc: "garbage", in: map[string]string{"memory.available": "lots"}, wantErr: true},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			got, err := parseThresholds(test.in)
			if (err != nil) != test.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, test.wantErr)
			}
			if test.wantErr {
				return
			}
			values := map[string]int64{}
			for _, th := range got {
				values[th.signal] = th.value(1000)
			}
			if len(values) != len(test.want) {
				t.Fatalf("got %v, want %v", values, test.want)
			}
			for k, v := range test.want {
				if values[k] != v {
					t.Errorf("%s = %d, want %d", k, values[k], v)
				}
			}
		})
	}
}

func TestAllocatable(t *testing.T) {
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
			desc:         "never negative",
			kubeReserved: v1.ResourceList{"cpu": resource.MustParse("8"), "memory": resource.MustParse("9Gi")},
			want:         map[v1.ResourceName]string{"cpu": "0", "memory": "0", "pods": "110", "ephemeral-storage": "100Gi"},
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
			c, _, h, _, _ := testController(t, Options{EvictionHard: test.eviction,
				SystemReserved: test.systemReserved, KubeReserved: test.kubeReserved})
			h.m.hugePages = test.hugePages
			node := &v1.Node{}
			c.setMachineInfo(node, h.m)
			if len(node.Status.Allocatable) != len(test.want) {
				t.Fatalf("allocatable = %v, want %v", node.Status.Allocatable, test.want)
			}
			for name, want := range test.want {
				got := node.Status.Allocatable[name]
				if got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("allocatable %s = %s, want %s", name, got.String(), want)
				}
			}
		})
	}
}

func quantityString(v int64) string { return resource.NewQuantity(v, resource.BinarySI).String() }

func TestCapacity(t *testing.T) {
	t.Parallel()
	c, _, h, _, _ := testController(t, Options{MaxPods: 50})
	h.m.hugePages = map[int64]int64{2 * mi: 0, gi: 2 * gi}
	node := &v1.Node{Status: v1.NodeStatus{
		Capacity: v1.ResourceList{
			"example.com/dongle": resource.MustParse("3"), // advertised by someone else: kept
			"hugepages-16Mi":     resource.MustParse("0"), // no longer on the machine: dropped
		},
		Allocatable: v1.ResourceList{"example.com/gone": resource.MustParse("1")},
	}}
	c.setMachineInfo(node, h.m)
	want := map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "50", "ephemeral-storage": "100Gi",
		"example.com/dongle": "3", "hugepages-2Mi": "0", "hugepages-1Gi": "2Gi"}
	if len(node.Status.Capacity) != len(want) {
		t.Fatalf("capacity = %v, want %v", node.Status.Capacity, want)
	}
	for name, w := range want {
		if got := node.Status.Capacity[name]; got.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("capacity %s = %s, want %s", name, got.String(), w)
		}
	}
	if _, ok := node.Status.Allocatable["example.com/gone"]; ok {
		t.Errorf("allocatable kept an extended resource missing from capacity")
	}
	if got := node.Status.Allocatable[v1.ResourceMemory]; got.Cmp(resource.MustParse("6Gi")) != 0 {
		t.Errorf("allocatable memory = %s, want 6Gi", got.String())
	}
	if node.Status.NodeInfo.MachineID != "machine-id" || node.Status.NodeInfo.SystemUUID != "system-uuid" ||
		node.Status.NodeInfo.BootID != "boot-1" {
		t.Errorf("nodeInfo ids = %+v", node.Status.NodeInfo)
	}
}

func TestObservePressure(t *testing.T) {
	t.Parallel()
	thresholds, err := parseThresholds(map[string]string{"memory.available": "1Gi", "nodefs.available": "10%",
		"nodefs.inodesFree": "5%", "pid.available": "1000"})
	if err != nil {
		t.Fatal(err)
	}
	base := newFakeHost().u
	for _, test := range []struct {
		desc   string
		change func(u *usage)
		want   pressure
	}{
		{desc: "plenty", change: func(*usage) {}},
		{desc: "memory low", change: func(u *usage) { u.memoryAvailable = gi - 1 }, want: pressure{memory: true}},
		{desc: "memory at threshold", change: func(u *usage) { u.memoryAvailable = gi }},
		{desc: "disk low", change: func(u *usage) { u.fsAvailable = 9 * gi }, want: pressure{disk: true}},
		{desc: "inodes low", change: func(u *usage) { u.inodesFree = 49999 }, want: pressure{disk: true}},
		{desc: "pids low", change: func(u *usage) { u.processes = u.maxPID - 999 }, want: pressure{pid: true}},
		{desc: "unknown capacity never pressure", change: func(u *usage) { *u = usage{} }},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			u := base
			test.change(&u)
			if got := observePressure(thresholds, u); got != test.want {
				t.Errorf("pressure = %+v, want %+v", got, test.want)
			}
		})
	}
}

func TestPressureTracker(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := pressureTracker{period: 5 * time.Minute}
	steps := []struct {
		at       time.Duration
		observed pressure
		want     pressure
	}{
		{at: 0, observed: pressure{}, want: pressure{}},
		{at: time.Minute, observed: pressure{memory: true}, want: pressure{memory: true}},
		{at: 2 * time.Minute, observed: pressure{}, want: pressure{memory: true}},
		{at: 5*time.Minute + 59*time.Second, observed: pressure{disk: true}, want: pressure{memory: true, disk: true}},
		{at: 6 * time.Minute, observed: pressure{}, want: pressure{disk: true}},
		{at: 11 * time.Minute, observed: pressure{}, want: pressure{}},
	}
	for _, s := range steps {
		if got := tr.update(s.observed, start.Add(s.at)); got != s.want {
			t.Errorf("at %s: pressure = %+v, want %+v", s.at, got, s.want)
		}
	}
}
