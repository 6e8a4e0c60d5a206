package stats

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

func TestDiskstatsCounted(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"sda": true, "sda1": true, "sdab12": true, "vda": true, "vdb3": true, "xvda": true, "xvdf1": true,
		"dm-0": true, "dm-12": true,
		"sd": false, "sd1": false, "sda1b": false, "dm-": false, "dm-a": false, "nvme0n1": false,
		"nvme0n1p1": false, "loop0": false, "md0": false, "mmcblk0p1": false, "hda": false, "xvd": false,
		"sdA": false, "": false,
	} {
		if got := diskstatsCounted([]byte(name)); got != want {
			t.Errorf("diskstatsCounted(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestSetDiskstats: a partition takes the counted line named as its device
// label, else the counted line with its device number, else zeros; a
// malformed counted line is reported and skipped.
func TestSetDiskstats(t *testing.T) {
	t.Parallel()
	const file = `   8       0 sda 100 1 200 3 400 5 600 7 0 9 10 0 0 0 0 0 0
   8       1 sda1 11 12 13 14 15 16 17 18 19 20 21 0 0 0 0 0 0
   8       2 sda2 21 22 23 24 25 26 27 28 29 30 31 0 0 0 0 0 0
 252      16 vdb 41 42 43 44 45 46 47 48 49 50 51
 252       0 vda 31 32 33 34 35 36 37 38 39 40 41 0 0 0 0 0 0
 253       0 dm-0 51 52 53 54 55 56 57 58 59 60 61 0 0 0 0 0 0
 259       1 nvme0n1p1 61 62 63 64 65 66 67 68 69 70 71 0 0 0 0 0 0
   7       0 loop0 71 72 73 74 75 76 77 78 79 80 81 0 0 0 0 0 0
 254       0 vdz 1 2 3
`
	parts := []*partition{
		{key: "/dev/sda1", major: 8, minor: 1},             // by name
		{key: "/dev/root", major: 8, minor: 2},             // by number
		{key: "/dev/mapper/vg-root", major: 253, minor: 0}, // by number (dm-0)
		{key: "/dev/vdb", major: 252, minor: 0},            // the name wins over vda's number, listed after
		{key: "/dev/nvme0n1p1", major: 259, minor: 1},      // not counted
		{key: "/dev/loop0", major: 7, minor: 0},            // not counted
		{key: "/dev/shm", mountPoint: "/dev/shm", major: 0, minor: 31},
		{key: "overlay_0-50", major: 0, minor: 50},
		{key: "/dev/vdz", major: 254, minor: 0}, // malformed
	}
	parts[0].disk = diskStats{99} // a stale reading is not kept
	err := setDiskstats([]byte(file), parts)
	if err == nil || !strings.Contains(err.Error(), "vdz") {
		t.Errorf("error %v, want the malformed vdz line", err)
	}
	seq := func(from uint64) diskStats {
		var d diskStats
		for i := range d {
			d[i] = from + uint64(i)
		}
		return d
	}
	want := []diskStats{seq(11), seq(21), seq(51), seq(41), {}, {}, {}, {}, {}}
	for i, p := range parts {
		if p.disk != want[i] {
			t.Errorf("%s: %v, want %v", p.key, p.disk, want[i])
		}
	}
}

// diskstatsLine is a /proc/diskstats line (kernel 5.5+, 17 counters) whose
// eleven counters start at base.
func diskstatsLine(major, minor uint32, name string, base int) string {
	fields := []string{strconv.Itoa(int(major)), strconv.Itoa(int(minor)), name}
	for i := range 11 {
		fields = append(fields, strconv.Itoa(base+i*1000))
	}
	return "  " + strings.Join(append(fields, "0", "0", "0", "0", "0", "0"), " ") + "\n"
}

// TestCadvisorDiskstats scrapes the diskstats series: the root row's
// partitions carry their device's counters (by name, by number, zeros for
// tmpfs), times in milliseconds divided by 1e9 as cAdvisor serves them; the
// app container's filesystem zeros; a blkio series of the same device label
// hides the filesystem one; the sandbox and pod rows none. /proc/diskstats is
// read once per cadvisorSpecPeriod.
func TestCadvisorDiskstats(t *testing.T) {
	p, f := cadvisorTestEnv(t)
	rt := p.runtime.(*critest.FakeRuntimeService)
	layers, tmpfs := t.TempDir(), t.TempDir()
	var st unix.Stat_t
	if err := unix.Stat(layers, &st); err != nil {
		t.Fatal(err)
	}
	major, minor := unix.Major(st.Dev), unix.Minor(st.Dev)
	f.write("proc/self/mountinfo", strings.Join(append(f.mounts,
		"23 1 0:21 / / rw - ext4 /dev/vda rw",
		fmt.Sprintf("40 23 %d:%d / %s rw - ext4 /dev/layers rw", major, minor, layers),
		"42 23 0:50 / "+tmpfs+" rw - tmpfs tmpfs rw",
	), "\n")+"\n")
	writeDiskstats := func(base int) {
		f.write("proc/diskstats", diskstatsLine(252, 0, "vda", base)+diskstatsLine(major, minor, "dm-7", base+1)+
			diskstatsLine(7, 0, "loop0", base+2))
	}
	writeDiskstats(1)
	rt.SetFakeContainerStats([]*runtimeapi.ContainerStats{{
		Attributes: &runtimeapi.ContainerAttributes{Id: "c1"},
		WritableLayer: &runtimeapi.FilesystemUsage{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: layers},
			UsedBytes: u64(1000)},
	}})
	clock := time.Now()
	p.now = func() time.Time { return clock }
	h := p.CadvisorMetrics(CadvisorOptions{SandboxImage: "pause:3.10"})
	c := h.(*cadvisor)
	c.devNames[[2]uint64{254, 0}] = "/dev/vda" // the blkio device of every fake cgroup
	refreshed := make(chan struct{}, 1)
	c.fs.refreshed = func() { refreshed <- struct{}{} }
	scrapeCadvisor(t, h, false)
	select {
	case <-refreshed:
	case <-time.After(10 * time.Second):
		t.Fatal("the usage refresh did not end")
	}
	body := scrapeText(t, h)
	ts := " " + strconv.FormatInt(clock.UnixMilli(), 10) + "\n"
	root := func(dev string) string {
		return `{container="",device="` + dev + `",id="/",image="",name="",namespace="",pod=""} `
	}
	c1 := `{container="app",device="/dev/layers",id="/kubepods/burstable/podu1/c1",image="busybox:1",` +
		`name="k8s_app_web_default_u1_0",namespace="default",pod="web"} `
	for _, want := range []string{
		"# HELP container_fs_reads_merged_total Cumulative count of reads merged\n# TYPE container_fs_reads_merged_total counter\n",
		"container_fs_reads_total" + root("/dev/layers") + "2" + ts,
		"container_fs_reads_merged_total" + root("/dev/layers") + "1002" + ts,
		"container_fs_sector_reads_total" + root("/dev/layers") + "2002" + ts,
		"container_fs_read_seconds_total" + root("/dev/layers") + "3.002e-06" + ts,
		"container_fs_writes_total" + root("/dev/layers") + "4002" + ts,
		"container_fs_writes_merged_total" + root("/dev/layers") + "5002" + ts,
		"container_fs_sector_writes_total" + root("/dev/layers") + "6002" + ts,
		"container_fs_write_seconds_total" + root("/dev/layers") + "7.002e-06" + ts,
		"container_fs_io_current" + root("/dev/layers") + "8002" + ts,
		"container_fs_io_time_seconds_total" + root("/dev/layers") + "9.002e-06" + ts,
		"container_fs_io_time_weighted_seconds_total" + root("/dev/layers") + "1.0002e-05" + ts,
		"container_fs_reads_merged_total" + root("/dev/vda") + "1001" + ts,
		"container_fs_io_time_weighted_seconds_total" + root("/dev/vda") + "1.0001e-05" + ts,
		"container_fs_reads_merged_total" + root(tmpfs) + "0" + ts,
		"container_fs_reads_total" + root("/dev/vda") + "2" + ts, // blkio's 254:0, not diskstats' vda
		"container_fs_writes_total" + root("/dev/vda") + "3" + ts,
		"container_fs_reads_total" + c1 + "0" + ts,
		"container_fs_sector_writes_total" + c1 + "0" + ts,
		"container_fs_io_current" + c1 + "0" + ts,
		"container_fs_io_time_weighted_seconds_total" + c1 + "0" + ts,
	} {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("no line %q in\n%s", want, body)
		}
	}
	fams := scrapeCadvisor(t, h, false)
	for name, n := range map[string]int{
		// root: /dev/layers, /dev/vda (blkio) and the tmpfs; c1: /dev/layers
		// and /dev/vda (blkio); the other rows /dev/vda (blkio).
		"container_fs_reads_total": 3 + 2 + 6,
		// root: three filesystems; c1: one.
		"container_fs_reads_merged_total":             4,
		"container_fs_io_time_weighted_seconds_total": 4,
	} {
		if got := len(fams[name].GetMetric()); got != n {
			t.Errorf("%s: %d series, want %d", name, got, n)
		}
	}
	if got := series(fams, "container_fs_reads_total", map[string]string{"id": "/", "device": "/dev/vda"}); len(got) != 1 {
		t.Errorf("root /dev/vda reads: %d series, want 1 (the blkio one)", len(got))
	}
	for _, id := range []string{"/kubepods/burstable/podu1/sb1", "/kubepods/burstable/podu1"} {
		if got := series(fams, "container_fs_sector_reads_total", map[string]string{"id": id}); len(got) != 0 {
			t.Errorf("%s: diskstats series %v", id, got)
		}
	}

	// Within the period the counters read are served again; after it, new ones.
	writeDiskstats(100)
	clock = clock.Add(cadvisorSpecPeriod - time.Second)
	fams = scrapeCadvisor(t, h, false)
	if got := series(fams, "container_fs_reads_merged_total", map[string]string{"id": "/", "device": "/dev/vda"}); len(got) != 1 || value(got[0]) != 1001 {
		t.Errorf("within the period: %v, want 1001", got)
	}
	clock = clock.Add(2 * time.Second)
	fams = scrapeCadvisor(t, h, false)
	if got := series(fams, "container_fs_reads_merged_total", map[string]string{"id": "/", "device": "/dev/vda"}); len(got) != 1 || value(got[0]) != 1100 {
		t.Errorf("after the period: %v, want 1100", got)
	}
}

// TestCadvisorDiskstatsFamilies: the families' types and help texts are
// cAdvisor v0.60.5's, and the families are sorted by name.
func TestCadvisorDiskstatsFamilies(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"container_fs_reads_merged_total":             "counter Cumulative count of reads merged",
		"container_fs_writes_merged_total":            "counter Cumulative count of writes merged",
		"container_fs_sector_reads_total":             "counter Cumulative count of sector reads completed",
		"container_fs_sector_writes_total":            "counter Cumulative count of sector writes completed",
		"container_fs_read_seconds_total":             "counter Cumulative count of seconds spent reading",
		"container_fs_write_seconds_total":            "counter Cumulative count of seconds spent writing",
		"container_fs_io_current":                     "gauge Number of I/Os currently in progress",
		"container_fs_io_time_seconds_total":          "counter Cumulative count of seconds spent doing I/Os",
		"container_fs_io_time_weighted_seconds_total": "counter Cumulative weighted I/O time in seconds",
		"container_fs_reads_total":                    "counter Cumulative count of reads completed",
		"container_fs_writes_total":                   "counter Cumulative count of writes completed",
	}
	for i, f := range cadvisorFamilies {
		if i > 0 && cadvisorFamilies[i-1].name >= f.name {
			t.Errorf("%s after %s", f.name, cadvisorFamilies[i-1].name)
		}
		if w, ok := want[f.name]; ok {
			if got := f.typ + " " + f.help; got != w {
				t.Errorf("%s: %q, want %q", f.name, got, w)
			}
			delete(want, f.name)
		}
	}
	for name := range want {
		t.Errorf("%s not served", name)
	}
}

// scrapeText is the uncompressed exposition of one scrape.
func scrapeText(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	return rec.Body.String()
}
