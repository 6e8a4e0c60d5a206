package nodestatus

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

func TestCapacity(t *testing.T) {
	t.Parallel()
	m := testMachine()
	m.HugePages = map[int64]int64{2 * mi: 0, gi: 2 * gi}
	res := testResources(t, resources.Options{Machine: m, MaxPods: 50})
	if err := res.SetExtendedCapacity(v1.ResourceList{"example.com/plugged": resource.MustParse("2")}); err != nil {
		t.Fatal(err)
	}
	c, _, _, _, _ := testController(t, Options{Resources: res})
	node := &v1.Node{Status: v1.NodeStatus{
		Capacity: v1.ResourceList{
			"example.com/dongle": resource.MustParse("3"), // advertised by someone else: kept
			"hugepages-16Mi":     resource.MustParse("0"), // no longer on the machine: dropped
		},
		Allocatable: v1.ResourceList{"example.com/gone": resource.MustParse("1")},
	}}
	c.setMachineInfo(node, m)
	want := map[v1.ResourceName]string{"cpu": "4", "memory": "8Gi", "pods": "50", "ephemeral-storage": "100Gi",
		"example.com/dongle": "3", "example.com/plugged": "2", "hugepages-2Mi": "0", "hugepages-1Gi": "2Gi"}
	if len(node.Status.Capacity) != len(want) {
		t.Fatalf("capacity = %v, want %v", node.Status.Capacity, want)
	}
	for name, w := range want {
		if got := node.Status.Capacity[name]; got.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("capacity %s = %s, want %s", name, got.String(), w)
		}
		if _, ok := node.Status.Allocatable[name]; !ok {
			t.Errorf("no allocatable %s", name)
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
	thresholds, err := resources.ParseThresholds(map[string]string{"memory.available": "1Gi", "nodefs.available": "10%",
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
