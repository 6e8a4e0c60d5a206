package cgroups

import (
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

// TestReadCadvisorV2 reads a cgroup2 directory in the kernel's formats (as
// Debian 13's 6.12 writes them): cpu.stat microseconds become nanoseconds,
// working set is memory.current less inactive_file, bytes per device come
// from io.stat; the spec turns
// cpu.weight into cAdvisor's shares and reads "max" as 2^64-1.
func TestReadCadvisorV2(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "kubepods.slice", "docker-c.scope")
	fstest.WriteTree(t, dir, map[string]string{
		"cpu.stat": "usage_usec 1500000\nuser_usec 1200000\nsystem_usec 300000\ncore_sched.force_idle_usec 0\n" +
			"nr_periods 10\nnr_throttled 2\nthrottled_usec 3000000\nnr_bursts 0\nburst_usec 0\n",
		"cpu.weight": "4\n", "cpu.max": "50000 100000\n",
		"memory.current": "3000000\n", "memory.peak": "9000000\n", "memory.swap.current": "5\n",
		"memory.stat": "anon 2000000\nfile 1000000\nkernel 0\nfile_mapped 300\nshmem 0\ninactive_anon 0\nactive_anon 2000000\n" +
			"inactive_file 400000\nactive_file 600000\n",
		"io.stat":         "254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n7:1 rbytes=1 wbytes=2 rios=1 wios=1 dbytes=0 dios=0\n",
		"memory.max":      "67108864\n",
		"memory.swap.max": "max\n",
		"memory.min":      "0\n",
	})
	h := NewHeldFiles()
	d := CadvisorDirs{Unified: dir}
	var s CadvisorStats
	if err := h.ReadCadvisor(&d, time.Now(), &s); err != nil {
		t.Fatal(err)
	}
	want := CadvisorStats{
		HasCPU: true, CPUUsage: 1500000000, CPUUser: 1200000000, CPUSystem: 300000000,
		HasThrottling: true, Periods: 10, Throttled: 2, ThrottledTime: 3000000000,
		HasMemory: true, MemUsage: 3000000, MemMaxUsage: 9000000, WorkingSet: 2600000,
		RSS: 2000000, Cache: 1000000, Swap: 5, MappedFile: 300,
		IO: []DeviceIO{deviceIO(254, 0, map[string]uint64{"Read": 4096, "Write": 8192}, 1, 2),
			deviceIO(7, 1, map[string]uint64{"Read": 1, "Write": 2}, 1, 1)},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("stats\n got %+v\nwant %+v", s, want)
	}
	spec := h.ReadCadvisorSpec(d)
	wantSpec := CadvisorSpec{HasCPU: true, Shares: 80, Period: 100000, Quota: 50000,
		HasMemory: true, Limit: 64 << 20, SwapLimit: math.MaxUint64, Reservation: 0}
	if spec != wantSpec {
		t.Errorf("spec\n got %+v\nwant %+v", spec, wantSpec)
	}
	if got := d.ProcsDir(); got != dir {
		t.Errorf("ProcsDir = %q, want %q", got, dir)
	}
}

// TestReadCadvisorV2Root: the cgroup2 root has cpu.stat and memory.stat but
// no memory.current or cpu.weight: CPU figures, no memory ones, and a CPU
// spec without shares (cAdvisor's 0).
func TestReadCadvisorV2Root(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fstest.WriteTree(t, dir, map[string]string{
		"cpu.stat":    "usage_usec 10\nuser_usec 6\nsystem_usec 4\n",
		"memory.stat": "anon 1\nfile 2\n",
	})
	h := NewHeldFiles()
	d := CadvisorDirs{Unified: dir}
	var s CadvisorStats
	if err := h.ReadCadvisor(&d, time.Now(), &s); err != nil {
		t.Fatal(err)
	}
	if !s.HasCPU || s.CPUUsage != 10000 || s.HasMemory || s.HasThrottling {
		t.Errorf("root stats %+v, want CPU 10000ns and no memory or throttling", s)
	}
	if spec := h.ReadCadvisorSpec(d); spec != (CadvisorSpec{HasCPU: true}) {
		t.Errorf("root spec %+v, want HasCPU only", spec)
	}
	gone := CadvisorDirs{Unified: filepath.Join(dir, "gone")}
	if err := h.ReadCadvisor(&gone, time.Now(), &s); err == nil {
		t.Error("a removed cgroup read without error")
	}
}

func FuzzParseIOStat(f *testing.F) {
	f.Add([]byte("254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n"))
	f.Add([]byte("8:0 rbytes=\n:1 =5 x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, d := range ParseIOStat(b, nil) {
			_ = d.Read + d.Write
		}
	})
}
