package dockershim

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

// The parsing itself is tested in internal/cgroups; these tests cover the shim's
// adapter: its error for a host without cgroups, the field mapping of paths and
// samples, and errCgroupGone.

func TestCgroupParseMountinfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		in      string
		wantErr bool
	}{
		{desc: "v2", in: "24 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"},
		{desc: "v1", in: "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"},
		{desc: "no cgroup mount", in: "25 1 0:23 / / rw - ext4 /dev/sda1 rw\n", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if _, err := parseCgroupMountinfo(strings.NewReader(tc.in)); (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
		})
	}
}

func TestCgroupResolvePaths(t *testing.T) {
	t.Parallel()
	const mountinfo = "33 31 0:30 / /cg/cpuacct rw - cgroup cgroup rw,cpuacct\n" +
		"35 31 0:32 /nested /cg/memory rw - cgroup cgroup rw,memory\n" +
		"39 31 0:36 / /cg/pids rw - cgroup cgroup rw,pids\n" +
		"41 31 0:38 / /cg/unified rw - cgroup2 cgroup2 rw\n"
	m, err := parseCgroupMountinfo(strings.NewReader(mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc    string
		proc    string
		want    cgroupPaths
		wantErr bool
	}{
		{
			desc: "v1 controllers win on hybrid hosts",
			proc: "8:pids:/docker/abc\n4:memory:/nested/docker/abc\n2:cpuacct:/docker/abc\n0::/docker/abc\n",
			want: cgroupPaths{cpuacct: "/cg/cpuacct/docker/abc", memory: "/cg/memory/docker/abc", pids: "/cg/pids/docker/abc"},
		},
		{desc: "process without memory cgroup", proc: "0::/docker/abc\n", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p, err := parseProcCgroup(strings.NewReader(tc.proc))
			if err != nil {
				t.Fatal(err)
			}
			got, err := resolveCgroupPaths(m, p)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	parent := cgroupPaths{v2: true, unified: "/sys/fs/cgroup/kubepods/pod1/abc"}.parent()
	if want := (cgroupPaths{v2: true, unified: "/sys/fs/cgroup/kubepods/pod1"}); parent != want {
		t.Errorf("parent = %+v, want %+v", parent, want)
	}
}

func TestCgroupReadSample(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	v1 := cgroupPaths{
		cpuacct: filepath.Join(base, "v1/cpuacct/c"),
		memory:  filepath.Join(base, "v1/memory/c"),
		pids:    filepath.Join(base, "v1/pids/c"),
	}
	fstest.WriteTree(t, v1.cpuacct, map[string]string{"cpuacct.usage": "123456789\n"})
	fstest.WriteTree(t, v1.memory, map[string]string{
		"memory.usage_in_bytes": "1000000\n",
		"memory.limit_in_bytes": "2000000\n",
		"memory.stat":           "total_rss 700000\ntotal_inactive_file 200000\ntotal_pgfault 42\ntotal_pgmajfault 2\n",
	})
	fstest.WriteTree(t, v1.pids, map[string]string{"pids.current": "3\n"})
	v2 := cgroupPaths{v2: true, unified: filepath.Join(base, "v2/c")}
	fstest.WriteTree(t, v2.unified, map[string]string{
		"cpu.stat": "usage_usec 2500\n", "memory.current": "500\n", "memory.max": "max\n", "memory.stat": "inactive_file 100\n",
	})

	now := time.Unix(100, 0)
	for _, tc := range []struct {
		desc     string
		paths    cgroupPaths
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
		{desc: "v2 directory gone", paths: cgroupPaths{v2: true, unified: filepath.Join(base, "missing")}, wantGone: true},
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
