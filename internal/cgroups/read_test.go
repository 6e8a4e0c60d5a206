package cgroups

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

func TestReadSample(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	v1 := Paths{
		CPUAcct: filepath.Join(base, "v1/cpuacct/c"),
		Memory:  filepath.Join(base, "v1/memory/c"),
		Pids:    filepath.Join(base, "v1/pids/c"),
	}
	fstest.WriteTree(t, v1.CPUAcct, map[string]string{"cpuacct.usage": "123456789\n"})
	fstest.WriteTree(t, v1.Memory, map[string]string{
		"memory.usage_in_bytes": "1000000\n",
		"memory.limit_in_bytes": "9223372036854771712\n",
		"memory.stat": "cache 5\nrss 7\ninactive_file 3\ntotal_cache 50\ntotal_rss 700000\n" +
			"total_inactive_file 200000\ntotal_pgfault 42\ntotal_pgmajfault 2\n",
	})
	fstest.WriteTree(t, v1.Pids, map[string]string{"pids.current": "3\n"})

	v1Limited := v1
	v1Limited.Memory = filepath.Join(base, "v1/memory/limited")
	fstest.WriteTree(t, v1Limited.Memory, map[string]string{
		"memory.usage_in_bytes": "100\n", "memory.limit_in_bytes": "1000\n", "memory.stat": "total_inactive_file 300\n",
	})
	v1MemoryOnly := Paths{Memory: v1Limited.Memory, CPUAcct: filepath.Join(base, "missing"), Pids: filepath.Join(base, "missing")}

	v2 := Paths{V2: true, Unified: filepath.Join(base, "v2/c")}
	fstest.WriteTree(t, v2.Unified, map[string]string{
		"cpu.stat":       "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n",
		"memory.current": "4096000\n",
		"memory.max":     "max\n",
		"memory.stat":    "anon 1000000\nfile 3000000\ninactive_file 96000\npgfault 11\npgmajfault 1\n",
		"pids.current":   "5\n",
	})
	v2Limited := Paths{V2: true, Unified: filepath.Join(base, "v2/limited")}
	fstest.WriteTree(t, v2Limited.Unified, map[string]string{
		"cpu.stat": "usage_usec 1\n", "memory.current": "500\n", "memory.max": "2000\n", "memory.stat": "inactive_file 700\n",
	})
	v2NoMemory := Paths{V2: true, Unified: filepath.Join(base, "v2/nomem")}
	fstest.WriteTree(t, v2NoMemory.Unified, map[string]string{"cpu.stat": "user_usec 1\n"})
	v2NoStat := Paths{V2: true, Unified: filepath.Join(base, "v2/nostat")}
	fstest.WriteTree(t, v2NoStat.Unified, map[string]string{"cpu.stat": "usage_usec 1\n", "memory.current": "500\n"})

	for _, tc := range []struct {
		desc     string
		paths    Paths
		want     Sample
		wantGone bool
	}{
		{
			desc: "v1 uses the hierarchical total_ counters; the kernel's unlimited is no limit", paths: v1,
			want: Sample{CPUNanos: 123456789, HasCPU: true, HasMemory: true, Pids: 3, HasPids: true,
				Memory: Memory{Usage: 1000000, WorkingSet: 800000, RSS: 700000, PageFaults: 42, MajorPageFaults: 2}},
		},
		{
			desc: "v1 limit; inactive above usage floors at 0", paths: v1Limited,
			want: Sample{CPUNanos: 123456789, HasCPU: true, HasMemory: true, Pids: 3, HasPids: true,
				Memory: Memory{Usage: 100, Limit: 1000}},
		},
		{
			desc: "v1 without readable cpuacct or pids", paths: v1MemoryOnly,
			want: Sample{HasMemory: true, Memory: Memory{Usage: 100, Limit: 1000}},
		},
		{
			desc: "v2 usage_usec in nanoseconds, max is unlimited", paths: v2,
			want: Sample{CPUNanos: 2500000, HasCPU: true, HasMemory: true, Pids: 5, HasPids: true,
				Memory: Memory{Usage: 4096000, WorkingSet: 4000000, RSS: 1000000, PageFaults: 11, MajorPageFaults: 1}},
		},
		{
			desc: "v2 limit, no pids controller", paths: v2Limited,
			want: Sample{CPUNanos: 1000, HasCPU: true, HasMemory: true, Memory: Memory{Usage: 500, WorkingSet: 0, Limit: 2000}},
		},
		{desc: "v2 without usage_usec nor memory controller", paths: v2NoMemory, want: Sample{}},
		{desc: "v2 memory.current without memory.stat", paths: v2NoStat, wantGone: true},
		{desc: "v1 directory gone", paths: Paths{Memory: filepath.Join(base, "missing")}, wantGone: true},
		{desc: "v2 directory gone", paths: Paths{V2: true, Unified: filepath.Join(base, "missing")}, wantGone: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := ReadSample(tc.paths)
			if tc.wantGone {
				if !errors.Is(err, ErrGone) || !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err = %v, want ErrGone and fs.ErrNotExist", err)
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

func TestReadCPU(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fstest.WriteTree(t, dir, map[string]string{"cpuacct.usage": "lots\n", "cpu.stat": "usage_usec 3\n"})
	if _, err := ReadCPUAcct(dir); err == nil || errors.Is(err, ErrGone) {
		t.Errorf("ReadCPUAcct of garbage: err = %v, want a parse error", err)
	}
	if n, ok, err := ReadCPUStat(dir); n != 3000 || !ok || err != nil {
		t.Errorf("ReadCPUStat = %d, %v, %v; want 3000, true, nil", n, ok, err)
	}
	missing := filepath.Join(dir, "missing")
	if _, _, err := ReadCPUStat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadCPUStat of a missing dir: err = %v, want fs.ErrNotExist", err)
	}
}

func TestMemoryFromStat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		got  Memory
		want Memory
	}{
		{
			desc: "v1 prefers total_ fields",
			got:  MemoryFromV1Stat(100, map[string]uint64{"rss": 1, "total_rss": 10, "inactive_file": 1, "total_inactive_file": 30}),
			want: Memory{Usage: 100, WorkingSet: 70, RSS: 10},
		},
		{
			desc: "v1 falls back to the plain fields",
			got:  MemoryFromV1Stat(100, map[string]uint64{"rss": 10, "inactive_file": 200, "pgfault": 3, "pgmajfault": 1}),
			want: Memory{Usage: 100, WorkingSet: 0, RSS: 10, PageFaults: 3, MajorPageFaults: 1},
		},
		{
			desc: "v2 names",
			got:  MemoryFromV2Stat(614400, map[string]uint64{"anon": 150000, "inactive_file": 250000, "pgfault": 99, "pgmajfault": 9}),
			want: Memory{Usage: 614400, WorkingSet: 364400, RSS: 150000, PageFaults: 99, MajorPageFaults: 9},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if tc.got != tc.want {
				t.Errorf("got %+v, want %+v", tc.got, tc.want)
			}
		})
	}
}
