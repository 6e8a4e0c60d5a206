//go:build linux

package cgroups

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestIntegrationHostCgroup reads this test process's own cgroup on the real host:
// the mount table, /proc/self/cgroup, then a sample of the cgroup and of its parent.
// A Linux host without cgroups fails the test: the stats of both callers need them.
func TestIntegrationHostCgroup(t *testing.T) {
	t.Parallel()
	mi, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer mi.Close()
	mounts, err := ParseMountinfo(mi)
	if err != nil {
		t.Fatal(err)
	}
	if mounts.Mode() == ModeNone {
		t.Fatal("no cgroup hierarchy is mounted")
	}
	pc, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	proc, err := ParseProcCgroup(pc)
	if err != nil {
		t.Fatal(err)
	}
	paths, err := Resolve(mounts, proc)
	if err != nil {
		t.Fatalf("Resolve(mode %v): %v", mounts.Mode(), err)
	}
	t.Logf("mode %v, paths %+v", mounts.Mode(), paths)
	for _, tc := range []struct {
		desc  string
		paths Paths
	}{
		{"own cgroup", paths},
		{"parent cgroup", parentWithin(mounts, paths)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s, err := ReadSample(tc.paths)
			if err != nil {
				t.Fatal(err)
			}
			// This process is in the cgroup: it uses memory and is one of its tasks.
			if !s.HasMemory || s.Memory.Usage == 0 || s.Memory.WorkingSet > s.Memory.Usage {
				t.Errorf("memory = %+v (has %v), want usage > 0 and working set <= usage", s.Memory, s.HasMemory)
			}
			// This process has run: its cgroup has used CPU time.
			if !s.HasCPU || s.CPUNanos == 0 {
				t.Errorf("cpu = %d ns (has %v), want > 0", s.CPUNanos, s.HasCPU)
			}
			checkHostPids(t, tc.paths, s)
			t.Logf("sample %+v", s)
		})
	}
}

// parentWithin is paths.Parent(), except that a directory at the root of its
// hierarchy (this process may sit in a root cgroup) stays where it is rather
// than leaving the cgroup file system.
func parentWithin(m Mounts, paths Paths) Paths {
	roots := map[string]bool{}
	for _, mnt := range m.V1 {
		roots[filepath.Clean(mnt.Mountpoint)] = true
	}
	if m.V2 != nil {
		roots[filepath.Clean(m.V2.Mountpoint)] = true
	}
	parent := paths.Parent()
	for _, f := range []struct{ own, up *string }{
		{&paths.Unified, &parent.Unified},
		{&paths.CPUAcct, &parent.CPUAcct},
		{&paths.Memory, &parent.Memory},
		{&paths.Pids, &parent.Pids},
	} {
		if roots[filepath.Clean(*f.own)] {
			*f.up = *f.own
		}
	}
	return parent
}

// checkHostPids requires the pids figure of a sample of paths: the pids controller
// must be mounted, and when its directory has pids.current (every cgroup but a
// root, where the kernel keeps none) the sample must count at least this process.
// At a root the sample must report no pids rather than a made-up count.
func checkHostPids(t *testing.T, paths Paths, s Sample) {
	t.Helper()
	dir := paths.Pids
	if paths.V2 {
		dir = paths.Unified
	}
	if dir == "" {
		t.Fatalf("no pids cgroup in %+v, want the pids controller of this host", paths)
	}
	_, err := os.Stat(filepath.Join(dir, "pids.current"))
	switch {
	case err == nil:
		if !s.HasPids || s.Pids == 0 {
			t.Errorf("pids = %d (has %v), want at least this process", s.Pids, s.HasPids)
		}
	case errors.Is(err, fs.ErrNotExist):
		if s.HasPids {
			t.Errorf("pids = %d read from %s, which has no pids.current", s.Pids, dir)
		}
		t.Logf("%s is a root pids cgroup without pids.current: no pids figure", dir)
	default:
		t.Fatal(err)
	}
}
