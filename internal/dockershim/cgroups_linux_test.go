package dockershim

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const cgroupTestMountinfoV1 = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 /nested /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
`

const cgroupTestMountinfoV2 = `24 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
25 1 0:23 / /my\040dir rw - ext4 /dev/sda1 rw
`

const cgroupTestProcV1 = `9:name=systemd:/docker/abc
8:pids:/docker/abc
4:memory:/nested/docker/abc
2:cpuacct:/docker/abc
1:cpu:/docker/abc
0::/docker/abc
`

func TestCgroupParseMountinfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		in      string
		wantV1  map[string]cgroupMount
		wantV2  *cgroupMount
		wantErr bool
	}{
		{
			desc: "v1 hybrid with a nested memory root",
			in:   cgroupTestMountinfoV1,
			wantV1: map[string]cgroupMount{
				"cpu":          {root: "/", mountpoint: "/sys/fs/cgroup/cpu"},
				"cpuacct":      {root: "/", mountpoint: "/sys/fs/cgroup/cpuacct"},
				"memory":       {root: "/nested", mountpoint: "/sys/fs/cgroup/memory"},
				"pids":         {root: "/", mountpoint: "/sys/fs/cgroup/pids"},
				"name=systemd": {root: "/", mountpoint: "/sys/fs/cgroup/systemd"},
			},
			wantV2: &cgroupMount{root: "/", mountpoint: "/sys/fs/cgroup/unified"},
		},
		{
			desc:   "v2 only, with optional fields",
			in:     cgroupTestMountinfoV2,
			wantV1: map[string]cgroupMount{},
			wantV2: &cgroupMount{root: "/", mountpoint: "/sys/fs/cgroup"},
		},
		{desc: "no cgroup mount", in: "25 1 0:23 / / rw - ext4 /dev/sda1 rw\n", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseCgroupMountinfo(strings.NewReader(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if !reflect.DeepEqual(got.v1, tc.wantV1) {
				t.Errorf("v1 = %v, want %v", got.v1, tc.wantV1)
			}
			if !reflect.DeepEqual(got.v2, tc.wantV2) {
				t.Errorf("v2 = %v, want %v", got.v2, tc.wantV2)
			}
		})
	}
}

func TestCgroupUnescapeMountinfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, in, want string }{
		{"plain", "/sys/fs/cgroup", "/sys/fs/cgroup"},
		{"space", `/my\040dir`, "/my dir"},
		{"trailing backslash", `/a\`, `/a\`},
		{"bad escape", `/a\9x9`, `/a\9x9`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := unescapeMountinfo(tc.in); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCgroupResolvePaths(t *testing.T) {
	t.Parallel()
	v1, err := parseCgroupMountinfo(strings.NewReader(cgroupTestMountinfoV1))
	if err != nil {
		t.Fatal(err)
	}
	v2, err := parseCgroupMountinfo(strings.NewReader(cgroupTestMountinfoV2))
	if err != nil {
		t.Fatal(err)
	}
	procV1, err := parseProcCgroup(strings.NewReader(cgroupTestProcV1))
	if err != nil {
		t.Fatal(err)
	}
	procV2, err := parseProcCgroup(strings.NewReader("0::/system.slice/docker-abc.scope\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc    string
		mounts  cgroupMounts
		proc    procCgroup
		want    cgroupPaths
		wantErr bool
	}{
		{
			desc:   "v1 controllers win on hybrid hosts; mount root is stripped",
			mounts: v1, proc: procV1,
			want: cgroupPaths{cpuacct: "/sys/fs/cgroup/cpuacct/docker/abc", memory: "/sys/fs/cgroup/memory/docker/abc", pids: "/sys/fs/cgroup/pids/docker/abc"},
		},
		{
			desc: "v2 unified", mounts: v2, proc: procV2,
			want: cgroupPaths{v2: true, unified: "/sys/fs/cgroup/system.slice/docker-abc.scope"},
		},
		{desc: "v1 host, process without memory cgroup", mounts: v1, proc: procV2, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := resolveCgroupPaths(tc.mounts, tc.proc)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	parent := cgroupPaths{v2: true, unified: "/sys/fs/cgroup/kubepods/pod1/abc"}.parent()
	if parent.unified != "/sys/fs/cgroup/kubepods/pod1" || parent.memory != "" {
		t.Errorf("parent = %+v", parent)
	}
}

func TestCgroupParseKeyed(t *testing.T) {
	t.Parallel()
	got := parseCgroupKeyed([]byte("cache 10\nrss 20\n\nbroken\nhierarchical_memory_limit 9223372036854771712\nneg -1\n"))
	want := map[string]uint64{"cache": 10, "rss": 20, "hierarchical_memory_limit": 9223372036854771712}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// cgroupTestWrite writes files (name -> content) under dir.
func cgroupTestWrite(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
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
	cgroupTestWrite(t, v1.cpuacct, map[string]string{"cpuacct.usage": "123456789\n"})
	cgroupTestWrite(t, v1.memory, map[string]string{
		"memory.usage_in_bytes": "1000000\n",
		"memory.limit_in_bytes": "9223372036854771712\n",
		"memory.stat": "cache 5\nrss 7\ninactive_file 3\ntotal_cache 50\ntotal_rss 700000\n" +
			"total_inactive_file 200000\ntotal_pgfault 42\ntotal_pgmajfault 2\n",
	})
	cgroupTestWrite(t, v1.pids, map[string]string{"pids.current": "3\n"})

	v1Limited := v1
	v1Limited.memory = filepath.Join(base, "v1/memory/limited")
	cgroupTestWrite(t, v1Limited.memory, map[string]string{
		"memory.usage_in_bytes": "100\n", "memory.limit_in_bytes": "1000\n", "memory.stat": "total_inactive_file 300\n",
	})

	v2 := cgroupPaths{v2: true, unified: filepath.Join(base, "v2/c")}
	cgroupTestWrite(t, v2.unified, map[string]string{
		"cpu.stat":       "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
		"memory.current": "4096000\n",
		"memory.max":     "max\n",
		"memory.stat":    "anon 1000000\nfile 3000000\ninactive_file 96000\npgfault 11\npgmajfault 1\n",
		"pids.current":   "5\n",
	})
	v2Limited := cgroupPaths{v2: true, unified: filepath.Join(base, "v2/limited")}
	cgroupTestWrite(t, v2Limited.unified, map[string]string{
		"cpu.stat": "usage_usec 1\n", "memory.current": "500\n", "memory.max": "2000\n", "memory.stat": "inactive_file 700\n",
	})

	now := time.Unix(100, 0)
	for _, tc := range []struct {
		desc     string
		paths    cgroupPaths
		want     usageSample
		wantGone bool
	}{
		{
			desc: "v1 uses the hierarchical total_ counters", paths: v1,
			want: usageSample{at: now, cpuNanos: 123456789, hasCPU: true, hasMemory: true, memUsage: 1000000,
				workingSet: 800000, rss: 700000, pageFaults: 42, majorPageFaults: 2, pids: 3, hasPids: true},
		},
		{
			desc: "v1 limit; inactive above usage floors at 0", paths: v1Limited,
			want: usageSample{at: now, cpuNanos: 123456789, hasCPU: true, hasMemory: true, memUsage: 100,
				workingSet: 0, memLimit: 1000, pids: 3, hasPids: true},
		},
		{
			desc: "v2 usage_usec in nanoseconds, max is unlimited", paths: v2,
			want: usageSample{at: now, cpuNanos: 2500000, hasCPU: true, hasMemory: true, memUsage: 4096000,
				workingSet: 4000000, rss: 1000000, pageFaults: 11, majorPageFaults: 1, pids: 5, hasPids: true},
		},
		{
			desc: "v2 limit, no pids controller", paths: v2Limited,
			want: usageSample{at: now, cpuNanos: 1000, hasCPU: true, hasMemory: true, memUsage: 500, memLimit: 2000},
		},
		{desc: "v1 directory gone", paths: cgroupPaths{memory: filepath.Join(base, "missing")}, wantGone: true},
		{desc: "v2 directory gone", paths: cgroupPaths{v2: true, unified: filepath.Join(base, "missing")}, wantGone: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
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
