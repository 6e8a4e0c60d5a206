package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

// AddProcess on fake trees: the cgroup is created in every hierarchy (a new
// cpuset level gets its parent's cpus and mems) and the pid written to its
// cgroup.procs, except where it is listed already; on cgroup v2 a root that
// refuses to enable controllers still gets the process.
func TestAddProcess(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	mp := func(name string) string {
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	v1 := Mounts{V1: map[string]Mount{"cpu": {Root: "/", Mountpoint: mp("cpu")}, "memory": {Root: "/", Mountpoint: mp("memory")},
		"cpuset": {Root: "/", Mountpoint: mp("cpuset")}}}
	for file, v := range map[string]string{"cpuset.cpus": "0-1", "cpuset.mems": "0"} {
		if err := os.WriteFile(filepath.Join(base, "cpuset", file), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := AddProcess(v1, "/system.slice/kubelet.service", 123); err != nil {
		t.Fatal(err)
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, h := range []string{"cpu", "memory", "cpuset"} {
		if got := read(filepath.Join(base, h, "system.slice/kubelet.service/cgroup.procs")); got != "123" {
			t.Errorf("%s cgroup.procs %q, want 123", h, got)
		}
	}
	if got := read(filepath.Join(base, "cpuset/system.slice/cpuset.cpus")); got != "0-1" {
		t.Errorf("new cpuset level's cpus %q, want the parent's 0-1", got)
	}
	// Listed already: not written again.
	procs := filepath.Join(base, "memory/system.slice/kubelet.service/cgroup.procs")
	if err := os.WriteFile(procs, []byte("123\n456\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := AddProcess(v1, "/system.slice/kubelet.service", 123); err != nil {
		t.Fatal(err)
	}
	if got := read(procs); got != "123\n456\n" {
		t.Errorf("cgroup.procs rewritten: %q", got)
	}
	// cgroup v2 whose root cannot enable controllers (no cgroup.controllers).
	v2 := Mounts{V2: &Mount{Root: "/", Mountpoint: mp("unified")}}
	if err := AddProcess(v2, "/kubelet", 7); err != nil {
		t.Fatal(err)
	}
	if got := read(filepath.Join(base, "unified/kubelet/cgroup.procs")); got != "7" {
		t.Errorf("v2 cgroup.procs %q, want 7", got)
	}
}
