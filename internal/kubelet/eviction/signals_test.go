package eviction

import (
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestMakeObservations(t *testing.T) {
	t.Parallel()
	t1, t2, t3 := t0.Add(time.Second), t0.Add(2*time.Second), t0.Add(3*time.Second)
	bin := func(avail, capacity int64, at time.Time) observation {
		return observation{available: avail, capacity: capacity, format: resource.BinarySI, time: at}
	}
	dec := func(avail, capacity int64, at time.Time) observation {
		return observation{available: avail, capacity: capacity, format: resource.DecimalSI, time: at}
	}
	mem := func(avail, ws int64, at time.Time) *statsapi.MemoryStats {
		return &statsapi.MemoryStats{Time: metav1.NewTime(at), AvailableBytes: u64(avail), WorkingSetBytes: u64(ws)}
	}
	full := &statsapi.NodeStats{
		Memory: mem(1*gi, 3*gi, t0),
		SystemContainers: []statsapi.ContainerStats{
			{Name: statsapi.SystemContainerKubelet, Memory: mem(9*gi, 9*gi, t0)},
			{Name: statsapi.SystemContainerPods, Memory: mem(512*mi, 2*gi, t1)},
		},
		Fs: &statsapi.FsStats{Time: metav1.NewTime(t2), AvailableBytes: u64(10 * gi), CapacityBytes: u64(100 * gi),
			InodesFree: u64(1000), Inodes: u64(5000)},
		Runtime: &statsapi.RuntimeStats{
			ImageFs: &statsapi.FsStats{Time: metav1.NewTime(t3), AvailableBytes: u64(20 * gi), CapacityBytes: u64(200 * gi),
				InodesFree: u64(2000), Inodes: u64(6000)},
			ContainerFs: &statsapi.FsStats{Time: metav1.NewTime(t3), AvailableBytes: u64(30 * gi), CapacityBytes: u64(300 * gi),
				InodesFree: u64(3000), Inodes: u64(7000)},
		},
		Rlimit: &statsapi.RlimitStats{Time: metav1.NewTime(t1), MaxPID: i64(4194304), NumOfRunningProcesses: i64(400)},
	}
	for _, tc := range []struct {
		desc      string
		node      *statsapi.NodeStats
		hugePages int64
		want      observations
	}{
		{desc: "empty node", node: &statsapi.NodeStats{}, want: observations{}},
		{
			desc: "every signal",
			node: full,
			want: observations{
				"memory.available":            bin(1*gi, 4*gi, t0),
				"allocatableMemory.available": bin(512*mi, 2*gi+512*mi, t1),
				"nodefs.available":            bin(10*gi, 100*gi, t2),
				"nodefs.inodesFree":           dec(1000, 5000, t2),
				"imagefs.available":           bin(20*gi, 200*gi, t3),
				"imagefs.inodesFree":          dec(2000, 6000, t3),
				"containerfs.available":       bin(30*gi, 300*gi, t3),
				"containerfs.inodesFree":      dec(3000, 7000, t3),
				"pid.available":               dec(4194304-400, 4194304, t1),
			},
		},
		{
			desc:      "huge pages come off memory.available and its capacity, not the pods cgroup",
			node:      &statsapi.NodeStats{Memory: mem(1*gi, 3*gi, t0), SystemContainers: full.SystemContainers},
			hugePages: 256 * mi,
			want: observations{
				"memory.available":            bin(768*mi, 3*gi+768*mi, t0),
				"allocatableMemory.available": bin(512*mi, 2*gi+512*mi, t1),
			},
		},
		{
			desc:      "huge pages above available leave none",
			node:      &statsapi.NodeStats{Memory: mem(1*gi, 3*gi, t0)},
			hugePages: 2 * gi,
			want:      observations{"memory.available": bin(0, 3*gi, t0)},
		},
		{
			desc: "missing fields make no observation",
			node: &statsapi.NodeStats{
				Memory:           &statsapi.MemoryStats{AvailableBytes: u64(gi)},
				SystemContainers: []statsapi.ContainerStats{{Name: statsapi.SystemContainerPods}},
				Fs:               &statsapi.FsStats{Time: metav1.NewTime(t2), AvailableBytes: u64(gi), Inodes: u64(10)},
				Runtime:          &statsapi.RuntimeStats{ImageFs: &statsapi.FsStats{InodesFree: u64(1), Inodes: u64(2)}},
				Rlimit:           &statsapi.RlimitStats{MaxPID: i64(100)},
			},
			want: observations{"imagefs.inodesFree": dec(1, 2, time.Time{})},
		},
		{
			desc: "bytes without inodes",
			node: &statsapi.NodeStats{Fs: &statsapi.FsStats{Time: metav1.NewTime(t2), AvailableBytes: u64(gi), CapacityBytes: u64(2 * gi)}},
			want: observations{"nodefs.available": bin(gi, 2*gi, t2)},
		},
		{
			desc: "runtime without filesystems",
			node: &statsapi.NodeStats{Runtime: &statsapi.RuntimeStats{}},
			want: observations{},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := makeObservations(tc.node, tc.hugePages)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("makeObservations =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestObservationAvailableQuantity(t *testing.T) {
	t.Parallel()
	o := observation{available: 1536 * mi, format: resource.BinarySI}
	if got := o.availableQuantity().String(); got != "1536Mi" {
		t.Errorf("availableQuantity = %s, want 1536Mi", got)
	}
	o = observation{available: 500, format: resource.DecimalSI}
	if got := o.availableQuantity().String(); got != "500" {
		t.Errorf("availableQuantity = %s, want 500", got)
	}
}

func TestThresholdsMet(t *testing.T) {
	t.Parallel()
	obs := func(avail, capacity int64) observations {
		return observations{"memory.available": {available: avail, capacity: capacity}}
	}
	for _, tc := range []struct {
		desc       string
		threshold  Threshold
		obs        observations
		minReclaim bool
		met        bool
	}{
		{desc: "below", threshold: hardQ("memory.available", "100Mi"), obs: obs(100*mi-1, gi), met: true},
		{desc: "equal is not met", threshold: hardQ("memory.available", "100Mi"), obs: obs(100*mi, gi)},
		{desc: "above", threshold: hardQ("memory.available", "100Mi"), obs: obs(200*mi, gi)},
		{desc: "percentage of capacity below", threshold: pct("memory.available", 0.1), obs: obs(99, 1000), met: true},
		{desc: "percentage of capacity equal", threshold: pct("memory.available", 0.1), obs: obs(100, 1000)},
		{desc: "no observation", threshold: hardQ("nodefs.available", "1Gi"), obs: obs(0, gi)},
		{
			desc: "min reclaim ignored without enforcement", threshold: withMinReclaim(hardQ("memory.available", "100Mi"), "50Mi"),
			obs: obs(120*mi, gi),
		},
		{
			desc: "min reclaim enforced", threshold: withMinReclaim(hardQ("memory.available", "100Mi"), "50Mi"),
			obs: obs(120*mi, gi), minReclaim: true, met: true,
		},
		{
			desc: "min reclaim reached", threshold: withMinReclaim(hardQ("memory.available", "100Mi"), "50Mi"),
			obs: obs(150*mi, gi), minReclaim: true,
		},
		{desc: "enforcement without min reclaim", threshold: hardQ("memory.available", "100Mi"), obs: obs(120*mi, gi), minReclaim: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := thresholdsMet([]Threshold{tc.threshold}, tc.obs, tc.minReclaim)
			if (len(got) == 1) != tc.met {
				t.Errorf("thresholdsMet = %q, want met=%v", describe(got), tc.met)
			}
		})
	}
}

func TestMergeThresholds(t *testing.T) {
	t.Parallel()
	a := []Threshold{hardQ("memory.available", "100Mi")}
	b := []Threshold{withMinReclaim(hardQ("memory.available", "100Mi"), "1Gi"), softQ("memory.available", "200Mi", time.Minute),
		hardQ("nodefs.available", "1Gi")}
	got := mergeThresholds(a, b)
	want := []string{"memory.available<100Mi", "memory.available<200Mi grace=1m0s", "nodefs.available<1Gi"}
	if d := describe(got); !slices.Equal(d, want) {
		t.Errorf("mergeThresholds = %q, want %q", d, want)
	}
	if len(a) != 1 {
		t.Errorf("mergeThresholds changed its input: %q", describe(a))
	}
}

func TestFirstObservedAt(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Minute)
	last := map[string]time.Time{"memory.available/hard": t0, "nodefs.available/hard": t0}
	got := firstObservedAt([]Threshold{hardQ("memory.available", "1Mi"), softQ("memory.available", "2Mi", time.Minute)}, last, now)
	want := map[string]time.Time{"memory.available/hard": t0, "memory.available/soft": now}
	if !maps.Equal(got, want) {
		t.Errorf("firstObservedAt = %v, want %v", got, want)
	}
}

func TestMetGracePeriod(t *testing.T) {
	t.Parallel()
	soft := softQ("memory.available", "1Gi", 30*time.Second)
	hard := hardQ("nodefs.available", "1Gi")
	for _, tc := range []struct {
		desc string
		at   map[string]time.Time
		now  time.Time
		want []string
	}{
		{desc: "soft not yet", at: map[string]time.Time{"memory.available/soft": t0}, now: t0.Add(29 * time.Second)},
		{
			desc: "soft at its grace period", at: map[string]time.Time{"memory.available/soft": t0}, now: t0.Add(30 * time.Second),
			want: []string{"memory.available<1Gi grace=30s"},
		},
		{
			desc: "hard at once", at: map[string]time.Time{"nodefs.available/hard": t0, "memory.available/soft": t0}, now: t0,
			want: []string{"nodefs.available<1Gi"},
		},
		{desc: "never observed", at: map[string]time.Time{}, now: t0.Add(time.Hour)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := describe(metGracePeriod([]Threshold{soft, hard}, tc.at, tc.now))
			if !slices.Equal(got, append([]string{}, tc.want...)) {
				t.Errorf("metGracePeriod = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestUpdatedStats(t *testing.T) {
	t.Parallel()
	th := []Threshold{hardQ("memory.available", "1Gi")}
	at := func(ts time.Time) observations { return observations{"memory.available": {time: ts}} }
	for _, tc := range []struct {
		desc      string
		obs, last observations
		want      bool
	}{
		{desc: "newer sample", obs: at(t0.Add(time.Second)), last: at(t0), want: true},
		{desc: "same sample", obs: at(t0), last: at(t0)},
		{desc: "older sample", obs: at(t0), last: at(t0.Add(time.Second))},
		{desc: "no previous sample", obs: at(t0), last: observations{}, want: true},
		{desc: "no previous pass", obs: at(t0), want: true},
		{desc: "sample without time", obs: at(time.Time{}), last: at(t0), want: true},
		{desc: "no sample", obs: observations{}, last: at(t0)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := updatedStats(th, tc.obs, tc.last); (len(got) == 1) != tc.want {
				t.Errorf("updatedStats = %q, want kept=%v", describe(got), tc.want)
			}
		})
	}
}

func TestConditionsOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		signal string
		want   v1.NodeConditionType
	}{
		{"memory.available", v1.NodeMemoryPressure},
		{"allocatableMemory.available", v1.NodeMemoryPressure},
		{"nodefs.available", v1.NodeDiskPressure},
		{"nodefs.inodesFree", v1.NodeDiskPressure},
		{"imagefs.available", v1.NodeDiskPressure},
		{"imagefs.inodesFree", v1.NodeDiskPressure},
		{"containerfs.available", v1.NodeDiskPressure},
		{"containerfs.inodesFree", v1.NodeDiskPressure},
		{"pid.available", v1.NodePIDPressure},
	} {
		t.Run(tc.signal, func(t *testing.T) {
			t.Parallel()
			got := conditionsOf([]Threshold{hardQ(tc.signal, "1"), softQ(tc.signal, "2", time.Second)})
			if !maps.Equal(got, map[v1.NodeConditionType]bool{tc.want: true}) {
				t.Errorf("conditionsOf(%s) = %v, want %s", tc.signal, got, tc.want)
			}
		})
	}
}

func TestConditionsObservedSince(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Hour)
	lastSeen := map[v1.NodeConditionType]time.Time{
		v1.NodeMemoryPressure: now.Add(-5*time.Minute + time.Second),
		v1.NodeDiskPressure:   now.Add(-5 * time.Minute),
		v1.NodePIDPressure:    now,
	}
	got := conditionsObservedSince(lastSeen, 5*time.Minute, now)
	want := map[v1.NodeConditionType]bool{v1.NodeMemoryPressure: true, v1.NodePIDPressure: true}
	if !maps.Equal(got, want) {
		t.Errorf("conditionsObservedSince = %v, want %v", got, want)
	}
}

func TestByEvictionPriority(t *testing.T) {
	t.Parallel()
	ts := []Threshold{hardQ("nodefs.available", "1"), hardQ("pid.available", "1"), hardQ("allocatableMemory.available", "1"),
		hardQ("imagefs.inodesFree", "1"), hardQ("memory.available", "1")}
	slices.SortStableFunc(ts, byEvictionPriority)
	var got []string
	for _, th := range ts {
		got = append(got, th.Signal)
	}
	if got[0] != "allocatableMemory.available" || got[1] != "memory.available" {
		t.Errorf("order = %q, want memory signals first", got)
	}
}

func TestUsageTrigger(t *testing.T) {
	t.Parallel()
	mem := &statsapi.MemoryStats{AvailableBytes: u64(1 * gi), WorkingSetBytes: u64(3 * gi), UsageBytes: u64(3*gi + 512*mi)}
	for _, tc := range []struct {
		desc      string
		threshold Threshold
		mem       *statsapi.MemoryStats
		hugePages int64
		want      int64
		ok        bool
	}{
		{desc: "quantity", threshold: hardQ("memory.available", "100Mi"), mem: mem, want: 4*gi - 100*mi + 512*mi, ok: true},
		{desc: "percentage of capacity", threshold: pct("memory.available", 0.25), mem: mem, want: 4*gi - gi + 512*mi, ok: true},
		{desc: "huge pages off capacity", threshold: hardQ("memory.available", "100Mi"), mem: mem, hugePages: gi,
			want: 3*gi - 100*mi + 512*mi, ok: true},
		{desc: "threshold above everything", threshold: hardQ("memory.available", "10Gi"), mem: mem},
		{desc: "no usage", threshold: hardQ("memory.available", "100Mi"),
			mem: &statsapi.MemoryStats{AvailableBytes: u64(gi), WorkingSetBytes: u64(gi)}},
		{desc: "no stats", threshold: hardQ("memory.available", "100Mi")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, ok := usageTrigger(tc.threshold, tc.mem, tc.hugePages)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Errorf("usageTrigger = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestDescribeNotifier(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		threshold Threshold
		want      string
	}{
		{hardQ("memory.available", "1"), "hard memory eviction threshold"},
		{softQ("memory.available", "1", time.Second), "soft memory eviction threshold"},
		{hardQ("allocatableMemory.available", "1"), "hard allocatable memory eviction threshold"},
	} {
		if got := describeNotifier(tc.threshold); got != tc.want {
			t.Errorf("describeNotifier(%s) = %q, want %q", tc.threshold.key(), got, tc.want)
		}
	}
}

func TestPodsMemory(t *testing.T) {
	t.Parallel()
	m := &statsapi.MemoryStats{AvailableBytes: u64(1)}
	node := &statsapi.NodeStats{SystemContainers: []statsapi.ContainerStats{{Name: "kubelet"}, {Name: "pods", Memory: m}}}
	if podsMemory(node) != m || podsMemory(&statsapi.NodeStats{}) != nil {
		t.Error("podsMemory does not find the pods system container")
	}
}
