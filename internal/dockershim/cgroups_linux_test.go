package dockershim

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

// The parsing and reading are tested in internal/cgroups; these tests cover the
// shim's field mapping of samples and errCgroupGone.

// readCgroupSample reads one cgroup afresh, as the shim's usage.
func readCgroupSample(p cgroups.Paths, now time.Time) (usageSample, error) {
	c, err := cgroups.ReadSample(p)
	if err != nil {
		return usageSample{at: now}, err
	}
	return usageSampleOf(c, now), nil
}

func TestCgroupReadSample(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	v1 := cgroups.Paths{
		CPUAcct: filepath.Join(base, "v1/cpuacct/c"),
		Memory:  filepath.Join(base, "v1/memory/c"),
		Pids:    filepath.Join(base, "v1/pids/c"),
	}
	fstest.WriteTree(t, v1.CPUAcct, map[string]string{"cpuacct.usage": "123456789\n"})
	fstest.WriteTree(t, v1.Memory, map[string]string{
		"memory.usage_in_bytes": "1000000\n",
		"memory.limit_in_bytes": "2000000\n",
		"memory.stat":           "total_rss 700000\ntotal_inactive_file 200000\ntotal_pgfault 42\ntotal_pgmajfault 2\n",
	})
	fstest.WriteTree(t, v1.Pids, map[string]string{"pids.current": "3\n"})
	v2 := cgroups.Paths{V2: true, Unified: filepath.Join(base, "v2/c")}
	fstest.WriteTree(t, v2.Unified, map[string]string{
		"cpu.stat": "usage_usec 2500\n", "memory.current": "500\n", "memory.max": "max\n", "memory.stat": "inactive_file 100\n",
	})

	now := time.Unix(100, 0)
	for _, tc := range []struct {
		desc     string
		paths    cgroups.Paths
		want     usageSample
		wantGone bool
	}{
		{
			desc: "v1: every field mapped", paths: v1,
			want: usageSample{at: now, cpuNanos: 123456789, hasCPU: true, hasMemory: true, memUsage: 1000000,
				workingSet: 800000, rss: 700000, pageFaults: 42, majorPageFaults: 2, memLimit: 2000000, pids: 3, hasPids: true},
		},
		{
			desc: "v2: unlimited, no pids", paths: v2,
			want: usageSample{at: now, cpuNanos: 2500000, hasCPU: true, hasMemory: true, memUsage: 500, workingSet: 400},
		},
		{desc: "v2 directory gone", paths: cgroups.Paths{V2: true, Unified: filepath.Join(base, "missing")}, wantGone: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := readCgroupSample(tc.paths, now)
			if tc.wantGone {
				if !errors.Is(err, errCgroupGone) {
					t.Fatalf("err = %v, want errCgroupGone", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// With Docker's systemd driver the kubelet's expanded slice path becomes the
// slice's name, as the old dockershim converted it; with cgroupfs it is kept.
func TestDockerCgroupParent(t *testing.T) {
	t.Parallel()
	const expanded = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice"
	for _, tc := range []struct{ driver, in, want string }{
		{"systemd", expanded, "kubepods-burstable-pod1_2.slice"},
		{"systemd", "", ""},
		{"cgroupfs", "/kubepods/burstable/pod1-2", "/kubepods/burstable/pod1-2"},
	} {
		s := &Service{host: hostInfo{cgroupDriver: tc.driver}}
		if got := s.dockerCgroupParent(tc.in); got != tc.want {
			t.Errorf("%s %q = %q, want %q", tc.driver, tc.in, got, tc.want)
		}
	}
}
