//go:build linux

package cgroupfs

import (
	"os"
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
		{"parent cgroup", paths.Parent()},
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
			if s.HasPids && s.Pids == 0 {
				t.Errorf("pids.current = 0, want at least this process")
			}
			t.Logf("sample %+v", s)
		})
	}
}
