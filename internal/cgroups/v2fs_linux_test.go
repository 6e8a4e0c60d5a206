package cgroups

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// cgroup v2 over a fake tree: the controllers are enabled down the path and
// the values written in v2's files.
func TestCgroupV2Files(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpuset cpu io memory hugetlb pids rdma misc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &cgroupfsDriver{fsBase{h: v2fs{root: dir}, kind: Cgroupfs}}
	shares, quota, period, mem, pids := uint64(512), int64(50000), uint64(100000), int64(64<<20), int64(100)
	if err := f.Create(Name{"kubepods", "pod1"}, &Resources{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &mem, PidsLimit: &pids}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"cgroup.subtree_control":          "+cpu +cpuset +memory +pids +hugetlb +io",
		"kubepods/cgroup.subtree_control": "+cpu +cpuset +memory +pids +hugetlb +io",
		"kubepods/pod1/cpu.weight":        "20",
		"kubepods/pod1/cpu.max":           "50000 100000",
		"kubepods/pod1/memory.max":        strconv.Itoa(64 << 20),
		"kubepods/pod1/pids.max":          "100",
	} {
		b, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q (%v), want %q", path, b, err, want)
		}
	}
	unlimited := int64(-1)
	if err := f.Update(Name{"kubepods", "pod1"}, &Resources{CPUQuota: &unlimited, Memory: &unlimited}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"kubepods/pod1/cpu.max": "max 100000", "kubepods/pod1/memory.max": "max"} {
		if b, _ := os.ReadFile(filepath.Join(dir, path)); string(b) != want {
			t.Errorf("%s = %q, want %q", path, b, want)
		}
	}
	if !f.Exists(Name{"kubepods", "pod1"}) || f.Exists(Name{"kubepods", "pod2"}) {
		t.Error("Exists on v2")
	}
	// The node-allocatable cgroup's memory protection is cleared (MemoryQoS off).
	for _, name := range []string{"memory.min", "memory.low"} {
		if err := os.WriteFile(filepath.Join(dir, "kubepods", name), []byte("1048576"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.ClearMemoryProtection(Name{"kubepods"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"memory.min", "memory.low"} {
		if b, _ := os.ReadFile(filepath.Join(dir, "kubepods", name)); string(b) != "0" {
			t.Errorf("kubepods/%s = %q, want 0", name, b)
		}
	}
}

// The v2 read-back (in-place resize): shares from cpu.weight, the CFS quota
// and period from cpu.max ("max": -1), the memory limit ("max": -1) and
// usage.
func TestCgroupV2Read(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pod := filepath.Join(dir, "kubepods", "pod1")
	if err := os.MkdirAll(pod, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"cpu.weight": "20\n", "cpu.max": "max 100000\n", "memory.max": "max\n", "memory.current": "123\n"} {
		if err := os.WriteFile(filepath.Join(pod, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := &cgroupfsDriver{fsBase{h: v2fs{root: dir}, kind: Cgroupfs}}
	a, err := d.Read(Name{"kubepods", "pod1"})
	if err != nil {
		t.Fatal(err)
	}
	if *a.CPUShares != WeightToCPUShares(20) || *a.CPUQuota != -1 || *a.CPUPeriod != 100000 || *a.Memory != -1 || a.MemoryUsage != 123 {
		t.Errorf("Read = shares %d quota %d period %d memory %d usage %d", *a.CPUShares, *a.CPUQuota, *a.CPUPeriod, *a.Memory, a.MemoryUsage)
	}
	if err := os.WriteFile(filepath.Join(pod, "cpu.max"), []byte("50000 100000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if a, err = d.Read(Name{"kubepods", "pod1"}); err != nil || *a.CPUQuota != 50000 {
		t.Errorf("Read with a quota = %v, %v", a.CPUQuota, err)
	}
	if _, err := d.Read(Name{"kubepods", "gone"}); err == nil {
		t.Error("Read of a missing cgroup: no error")
	}
}
