package cgroups

import (
	"fmt"
	"math"
	"testing"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
)

func TestSystemdUnitNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n            Name
		name, parent string
	}{
		{Name{"kubepods"}, "kubepods.slice", "-.slice"},
		{Name{"kubepods", "burstable"}, "kubepods-burstable.slice", "kubepods.slice"},
		{Name{"kubepods", "burstable", "pod1a2b-c3"}, "kubepods-burstable-pod1a2b_c3.slice", "kubepods-burstable.slice"},
	} {
		if name, parent := unit(tc.n); name != tc.name || parent != tc.parent {
			t.Errorf("unit(%v) = %s, %s; want %s, %s", tc.n, name, parent, tc.name, tc.parent)
		}
	}
	for v, want := range map[string]int{`"252.38-1~deb12u1"`: 252, `"v257"`: 257, `"241"`: 241, `""`: 0} {
		if got := systemdVersion(v); got != want {
			t.Errorf("systemdVersion(%s) = %d, want %d", v, got, want)
		}
	}
}

// TestSystemdProperties: the limits as libcontainer gives them to systemd for
// the kubelet: cpu shares (v2: weight), the quota per second rounded up to a
// whole percent of a CPU (and the file value with it), the period only where
// systemd knows it, memory and tasks with systemd's infinity for no limit.
func TestSystemdProperties(t *testing.T) {
	t.Parallel()
	shares, quota, period, mem, pids := uint64(512), int64(12345), uint64(100000), int64(64<<20), int64(-1)
	r := &Resources{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem, PidsLimit: &pids}
	props := func(list []sddbus.Property) map[string]any {
		out := map[string]any{}
		for _, p := range list {
			out[p.Name] = p.Value.Value()
		}
		return out
	}
	v1 := &systemdDriver{quotaPeriod: true}
	applied, list := v1.properties(r)
	want := map[string]any{"CPUShares": uint64(512), "CPUQuotaPeriodUSec": uint64(100000), "CPUQuotaPerSecUSec": uint64(130000),
		"MemoryLimit": uint64(64 << 20), "TasksMax": uint64(math.MaxUint64)}
	if got := props(list); len(got) != len(want) {
		t.Errorf("v1 properties %v, want %v", got, want)
	} else {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("v1 %s = %v, want %v", k, got[k], v)
			}
		}
	}
	if *applied.CPUQuota != 13000 || *r.CPUQuota != 12345 {
		t.Errorf("file quota %d (the caller's %d), want 13000 and the caller's Resources untouched", *applied.CPUQuota, *r.CPUQuota)
	}

	v2 := &systemdDriver{v2: true}
	unlimited := int64(-1)
	_, list = v2.properties(&Resources{CPUShares: &shares, CPUQuota: &unlimited, Memory: &unlimited})
	got := props(list)
	if got["CPUWeight"] != CPUSharesToWeight(512) || got["CPUQuotaPerSecUSec"] != uint64(math.MaxUint64) ||
		got["MemoryMax"] != uint64(math.MaxUint64) || got["CPUQuotaPeriodUSec"] != nil || got["MemoryLimit"] != nil {
		t.Errorf("v2 properties %v", got)
	}
}

func TestUnifiedProperties(t *testing.T) {
	t.Parallel()
	props, files, err := UnifiedProperties(map[string]string{"memory.high": "63750144", "memory.min": "0", "memory.low": "max", "memory.oom.group": "1", "memory.swap.max": "0"})
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(props)
	if want := "[{MemoryHigh @t 63750144} {MemoryLow @t 18446744073709551615} {MemoryMin @t 0} {MemorySwapMax @t 0}]"; got != want {
		t.Errorf("properties %s, want %s", got, want)
	}
	if len(files) != 1 || files["memory.oom.group"] != "1" {
		t.Errorf("files %v, want memory.oom.group 1 (no unit property sets it)", files)
	}
	if _, files, _ := UnifiedProperties(map[string]string{"memory.high": "max"}); files != nil {
		t.Errorf("files %v, want none", files)
	}
	if _, _, err := UnifiedProperties(map[string]string{"cpu.weight": "1"}); err == nil {
		t.Error("cpu.weight accepted")
	}
}
