package cgroups

import (
	"errors"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

// TestReadCadvisor reads a v1 cgroup in the kernel's file formats: hierarchical
// total_* memory.stat fields win, cpuacct.stat ticks become nanoseconds, the CFS
// counters come from cpu.stat, and blkio falls back from an empty BFQ file to the
// throttling layer's.
func TestReadCadvisor(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	d := CadvisorDirs{CPU: filepath.Join(base, "cpu/c"), CPUAcct: filepath.Join(base, "cpuacct/c"),
		Memory: filepath.Join(base, "memory/c"), Blkio: filepath.Join(base, "blkio/c")}
	fstest.WriteTree(t, d.CPU, map[string]string{
		"cpu.stat":   "nr_periods 10\nnr_throttled 2\nthrottled_time 3000000000\nnr_bursts 0\nburst_time 0\n",
		"cpu.shares": "512\n", "cpu.cfs_period_us": "100000\n", "cpu.cfs_quota_us": "50000\n",
	})
	fstest.WriteTree(t, d.CPUAcct, map[string]string{"cpuacct.usage": "1500000000\n", "cpuacct.stat": "user 120\nsystem 30\n"})
	fstest.WriteTree(t, d.Memory, map[string]string{
		"memory.usage_in_bytes": "3000\n", "memory.max_usage_in_bytes": "9000\n", "memory.failcnt": "4\n",
		"memory.stat": "cache 100\nrss 200\nmapped_file 30\nswap 0\ninactive_file 40\n" +
			"total_cache 1000\ntotal_rss 2000\ntotal_mapped_file 300\ntotal_swap 5\ntotal_inactive_file 4000\n",
		"memory.limit_in_bytes": "1048576\n", "memory.memsw.limit_in_bytes": "9223372036854771712\n",
		"memory.soft_limit_in_bytes": "9223372036854771712\n",
	})
	fstest.WriteTree(t, d.Blkio, map[string]string{
		"blkio.bfq.io_service_bytes_recursive": "Total 0\n",
		"blkio.throttle.io_service_bytes_recursive": "8:0 Read 4096\n8:0 Write 8192\n8:0 Sync 0\n8:0 Async 12288\n8:0 Total 12288\n" +
			"254:16 Read 1\n254:16 Write 2\n254:16 Total 3\nTotal 12291\n",
		"blkio.throttle.io_serviced_recursive": "8:0 Read 3\n8:0 Write 4\n8:0 Sync 0\n8:0 Async 7\n8:0 Total 7\nTotal 7\n",
	})
	h := NewHeldFiles()
	d.BlkioFile = h.BlkioFileV1(d.Blkio)
	if want := filepath.Join(d.Blkio, "blkio.throttle.io_service_bytes_recursive"); d.BlkioFile != want {
		t.Errorf("blkio file %s, want %s", d.BlkioFile, want)
	}
	var s CadvisorStats
	if err := h.ReadCadvisor(&d, time.Now(), &s); err != nil {
		t.Fatal(err)
	}
	want := CadvisorStats{
		HasCPU: true, CPUUsage: 1500000000, CPUUser: 1200000000, CPUSystem: 300000000,
		HasThrottling: true, Periods: 10, Throttled: 2, ThrottledTime: 3000000000,
		HasMemory: true, MemUsage: 3000, MemMaxUsage: 9000, MemFailcnt: 4, WorkingSet: 0, // inactive_file > usage: floored
		RSS: 2000, Cache: 1000, Swap: 5, MappedFile: 300,
		IO: []DeviceIO{
			deviceIO(8, 0, map[string]uint64{"Read": 4096, "Write": 8192, "Sync": 0, "Async": 12288, "Total": 12288}, 3, 4),
			deviceIO(254, 16, map[string]uint64{"Read": 1, "Write": 2, "Total": 3}, 0, 0),
		},
	}
	want.IO[1].HasServiced = false
	if !reflect.DeepEqual(s, want) {
		t.Errorf("stats\n got %+v\nwant %+v", s, want)
	}
	spec := h.ReadCadvisorSpec(d)
	if err := h.ReadCadvisor(&d, time.Now(), &s); err != nil || !reflect.DeepEqual(s, want) { // the joined paths, kept
		t.Errorf("second read: %v\n got %+v\nwant %+v", err, s, want)
	}
	if wantSpec := (CadvisorSpec{HasCPU: true, Shares: 512, Period: 100000, Quota: 50000, HasMemory: true, Limit: 1048576,
		SwapLimit: 9223372036854771712, Reservation: 9223372036854771712}); spec != wantSpec {
		t.Errorf("spec %+v, want %+v", spec, wantSpec)
	}
	fstest.WriteTree(t, d.CPU, map[string]string{"cpu.cfs_quota_us": "-1\n"})
	if spec := h.ReadCadvisorSpec(d); spec.Quota != 0 {
		t.Errorf("unlimited quota read as %d, want 0", spec.Quota)
	}

	// Without the memory hierarchy's files the cgroup is gone.
	if err := h.ReadCadvisor(&CadvisorDirs{Memory: filepath.Join(base, "memory/gone")}, time.Now(), &s); !errors.Is(err, ErrGone) {
		t.Errorf("missing cgroup: %v, want ErrGone", err)
	}
}

func TestParseBlkio(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc, in string
		want     []DeviceIO
	}{
		{"empty", "Total 0\n", nil},
		{"one device", "8:0 Read 10\n8:0 Write 20\n8:0 Sync 30\n8:0 Discard 0\n8:0 Total 30\nTotal 30\n",
			[]DeviceIO{unserviced(deviceIO(8, 0, map[string]uint64{"Read": 10, "Write": 20, "Sync": 30, "Discard": 0, "Total": 30}, 0, 0))}},
		{"garbage", "8:0 Read x\nnot a line\n", []DeviceIO{unserviced(deviceIO(8, 0, map[string]uint64{"Read": 0}, 0, 0))}},
	} {
		if got := ParseBlkio([]byte(tc.in), nil); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.desc, got, tc.want)
		}
	}
}

// deviceIO is a device's counts as the parsers make them: bytes per operation
// listed, reads and writes completed (serviced).
func deviceIO(major, minor uint64, bytes map[string]uint64, reads, writes uint64) DeviceIO {
	d := DeviceIO{Major: major, Minor: minor, Reads: reads, Writes: writes, HasServiced: true}
	for op, v := range bytes {
		d.setBytes(blkioOp([]byte(op)), v)
	}
	return d
}

func unserviced(d DeviceIO) DeviceIO {
	d.HasServiced = false
	return d
}

func TestBlkioOps(t *testing.T) {
	t.Parallel()
	if BlkioOps[blkioOpRead] != "Read" || BlkioOps[blkioOpWrite] != "Write" || !sort.StringsAreSorted(BlkioOps[:]) {
		t.Errorf("BlkioOps %v: Read at %d, Write at %d, sorted", BlkioOps, blkioOpRead, blkioOpWrite)
	}
	io := ParseBlkio([]byte("8:0 Read 10\n8:0 Write 20\n8:16 Read 1\n"), nil)
	ParseBlkioServiced([]byte("8:16 Read 5\n8:16 Write 6\n9:0 Read 1\nTotal 11\n"), io)
	if io[0].HasServiced || !io[1].HasServiced || io[1].Reads != 5 || io[1].Writes != 6 {
		t.Errorf("serviced %+v", io)
	}
}
