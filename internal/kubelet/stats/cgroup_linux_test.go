package stats

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeHost is a fake /proc and cgroup tree under a temp dir.
type fakeHost struct {
	t    *testing.T
	root string
	// mounts are mountinfo lines, "%s" standing for root.
	mounts []string
}

func newFakeHost(t *testing.T) *fakeHost {
	return &fakeHost{t: t, root: t.TempDir()}
}

// write creates root/rel with content.
func (f *fakeHost) write(rel, content string) {
	f.t.Helper()
	p := filepath.Join(f.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// mount adds a mountinfo line for a cgroup hierarchy mounted at root/rel.
func (f *fakeHost) mount(rel, fstype, super string) {
	n := len(f.mounts) + 30
	f.mounts = append(f.mounts, fmt.Sprintf("%d 23 0:%d / %s rw,relatime - %s %s %s",
		n, n, filepath.Join(f.root, rel), fstype, fstype, super))
}

func (f *fakeHost) reader() *hostReader {
	f.t.Helper()
	lines := append([]string{"23 1 0:21 / / rw - ext4 /dev/vda rw"}, f.mounts...)
	f.write("proc/self/mountinfo", strings.Join(lines, "\n")+"\n")
	return newHostReader(filepath.Join(f.root, "proc"))
}

const (
	testMeminfo = "MemTotal:       1000 kB\nMemFree:         400 kB\nAnonPages:       200 kB\n" +
		"Inactive(file):  100 kB\nSwapTotal:       300 kB\nSwapFree:        250 kB\n"
	testVmstat   = "pgfault 77\npgmajfault 7\n"
	testProcStat = "cpu  100 20 30 1000 5 1 2 3 0 0\ncpu0 100 20 30 1000 5 1 2 3 0 0\n"
)

// nodeSampleCase is one fake host layout and the sample read from it (time, MemTotal
// and swap are the same for all).
type nodeSampleCase struct {
	desc  string
	setup func(f *fakeHost)
	want  nodeSample
}

func nodeSampleCases() []nodeSampleCase {
	v1Tree := func(f *fakeHost) {
		f.mount("cg/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct")
		f.mount("cg/memory", "cgroup", "rw,memory")
		f.write("cg/cpu,cpuacct/cpuacct.usage", "123456789\n")
		f.write("cg/memory/memory.usage_in_bytes", "5000\n")
		f.write("cg/memory/memory.stat", "cache 1\nrss 2\ninactive_file 3\ntotal_cache 900\ntotal_rss 1500\n"+
			"total_inactive_file 1200\ntotal_pgfault 42\ntotal_pgmajfault 4\n")
	}
	return []nodeSampleCase{
		{
			desc:  "cgroup v1: cpuacct.usage and hierarchical memory.stat totals",
			setup: v1Tree,
			want: nodeSample{hasCPU: true, cpuNanos: 123456789, hasMemory: true, memUsage: 5000, workingSet: 3800,
				rss: 1500, pageFaults: 42, majorPageFaults: 4},
		},
		{
			desc: "hybrid: v1 controllers win over the unified mount",
			setup: func(f *fakeHost) {
				v1Tree(f)
				f.mount("cg/unified", "cgroup2", "rw")
				f.write("cg/unified/cpu.stat", "usage_usec 1\n")
			},
			want: nodeSample{hasCPU: true, cpuNanos: 123456789, hasMemory: true, memUsage: 5000, workingSet: 3800,
				rss: 1500, pageFaults: 42, majorPageFaults: 4},
		},
		{
			desc: "cgroup v1 without total_ fields uses the plain ones",
			setup: func(f *fakeHost) {
				f.mount("cg/memory", "cgroup", "rw,memory")
				f.mount("cg/cpuacct", "cgroup", "rw,cpuacct")
				f.write("cg/cpuacct/cpuacct.usage", "5\n")
				f.write("cg/memory/memory.usage_in_bytes", "100\n")
				f.write("cg/memory/memory.stat", "rss 10\ninactive_file 200\npgfault 3\npgmajfault 1\n")
			},
			want: nodeSample{hasCPU: true, cpuNanos: 5, hasMemory: true, memUsage: 100, workingSet: 0, rss: 10, pageFaults: 3, majorPageFaults: 1},
		},
		{
			desc: "cgroup v2: cpu.stat, usage from meminfo, the rest from the root's memory.stat",
			setup: func(f *fakeHost) {
				f.mount("cg", "cgroup2", "rw,nsdelegate")
				f.write("cg/cpu.stat", "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n")
				f.write("cg/memory.stat", "anon 150000\nfile 300000\ninactive_file 250000\npgfault 99\npgmajfault 9\n")
			},
			// usage = (1000 - 400) kB = 614400; working set = 614400 - 250000.
			want: nodeSample{hasCPU: true, cpuNanos: 2500000, hasMemory: true, memUsage: 614400, workingSet: 364400,
				rss: 150000, pageFaults: 99, majorPageFaults: 9},
		},
		{
			desc: "cgroup v2 root without memory.stat: meminfo and vmstat",
			setup: func(f *fakeHost) {
				f.mount("cg", "cgroup2", "rw")
				f.write("cg/cpu.stat", "usage_usec 7\n")
			},
			want: nodeSample{hasCPU: true, cpuNanos: 7000, hasMemory: true, memUsage: 614400, workingSet: 512000,
				rss: 204800, pageFaults: 77, majorPageFaults: 7},
		},
		{
			desc:  "no cgroup mounts: /proc/stat and meminfo",
			setup: func(*fakeHost) {},
			// (100 + 20 + 30 + 1 + 2 + 3) ticks * 10ms.
			want: nodeSample{hasCPU: true, cpuNanos: 1560000000, hasMemory: true, memUsage: 614400, workingSet: 512000,
				rss: 204800, pageFaults: 77, majorPageFaults: 7},
		},
	}
}

func TestReadNodeSample(t *testing.T) {
	t.Parallel()
	now := time.Unix(1700000000, 0)
	for _, tc := range nodeSampleCases() {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			f := newFakeHost(t)
			f.write("proc/meminfo", testMeminfo)
			f.write("proc/vmstat", testVmstat)
			f.write("proc/stat", testProcStat)
			tc.setup(f)
			got, err := f.reader().readNodeSample(now)
			if err != nil {
				t.Fatalf("readNodeSample: %v", err)
			}
			want := tc.want
			want.at = now
			want.memTotal = 1000 * 1024
			want.hasSwap, want.swapUsage, want.swapFree = true, 50*1024, 250*1024
			if got != want {
				t.Errorf("sample =\n %+v\nwant\n %+v", got, want)
			}
		})
	}
}

func TestReadNodeSampleErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc  string
		setup func(f *fakeHost)
	}{
		{desc: "no meminfo", setup: func(f *fakeHost) { f.write("proc/stat", testProcStat) }},
		{desc: "neither CPU nor memory readable", setup: func(f *fakeHost) {
			f.write("proc/meminfo", "SwapTotal: 0 kB\n")
		}},
		{desc: "garbage cpuacct.usage", setup: func(f *fakeHost) {
			f.write("proc/meminfo", "SwapTotal: 0 kB\n")
			f.mount("cg/cpuacct", "cgroup", "rw,cpuacct")
			f.write("cg/cpuacct/cpuacct.usage", "lots\n")
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			f := newFakeHost(t)
			tc.setup(f)
			if s, err := f.reader().readNodeSample(time.Now()); err == nil {
				t.Errorf("readNodeSample = %+v, want an error", s)
			}
		})
	}
}

func TestParseProcStatCPU(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, in string
		want     uint64
		wantErr  bool
	}{
		{desc: "busy fields only", in: testProcStat, want: 1560000000},
		{desc: "no cpu line", in: "intr 1 2 3\n", wantErr: true},
		{desc: "bad number", in: "cpu  x 0 0 0 0 0 0 0\n", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := parseProcStatCPU([]byte(tc.in))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseProcStatCPU = %d, %v; want %d, error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
