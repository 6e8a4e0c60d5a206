package stats

import (
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// fakeOOMs are the OOM watcher's counts by cgroup name.
type fakeOOMs map[string]uint64

func (f fakeOOMs) Count(name string) uint64 { return f[name] }

// v1Cgroup writes one cgroup's files, in the kernel's formats, in the cpu,
// cpuacct, memory and blkio hierarchies under cg/; quota "-1" is unlimited.
func (f *fakeHost) v1Cgroup(id, usageNs, quota, memUsage string) {
	f.write("cg/cpuacct"+id+"/cpuacct.usage", usageNs+"\n")
	f.write("cg/cpuacct"+id+"/cpuacct.stat", "user 150\nsystem 50\n")
	f.write("cg/cpu"+id+"/cpu.stat", "nr_periods 10\nnr_throttled 2\nthrottled_time 3000000000\nnr_bursts 0\nburst_time 0\n")
	f.write("cg/cpu"+id+"/cpu.shares", "2\n")
	f.write("cg/cpu"+id+"/cpu.cfs_period_us", "100000\n")
	f.write("cg/cpu"+id+"/cpu.cfs_quota_us", quota+"\n")
	m := "cg/memory" + id + "/"
	f.write(m+"memory.usage_in_bytes", memUsage+"\n")
	f.write(m+"memory.max_usage_in_bytes", "9000\n")
	f.write(m+"memory.failcnt", "0\n")
	f.write(m+"memory.limit_in_bytes", "9223372036854771712\n")
	f.write(m+"memory.memsw.limit_in_bytes", "9223372036854771712\n")
	f.write(m+"memory.soft_limit_in_bytes", "9223372036854771712\n")
	f.write(m+"memory.stat", "cache 100\nrss 200\nrss_huge 0\nshmem 0\nmapped_file 30\nswap 0\ninactive_file 40\n"+
		"hierarchical_memory_limit 9223372036854771712\ntotal_cache 1000\ntotal_rss 2000\ntotal_rss_huge 0\n"+
		"total_mapped_file 300\ntotal_swap 5\ntotal_inactive_file 400\ntotal_active_file 7\n")
	f.write(m+"cgroup.procs", "")
	f.write("cg/blkio"+id+"/blkio.bfq.io_service_bytes_recursive", "Total 0\n")
	f.write("cg/blkio"+id+"/blkio.throttle.io_service_bytes_recursive",
		"254:0 Read 4096\n254:0 Write 8192\n254:0 Sync 0\n254:0 Async 12288\n254:0 Discard 0\n254:0 Total 12288\nTotal 12288\n")
	f.write("cg/blkio"+id+"/blkio.throttle.io_serviced_recursive",
		"254:0 Read 2\n254:0 Write 3\n254:0 Sync 0\n254:0 Async 5\n254:0 Discard 0\n254:0 Total 5\nTotal 5\n")
}

// cadvisorTestEnv is a Provider over the CRI fakes and a fake v1 host with the
// root, kubepods, burstable, one Burstable pod (sandbox sb1 and container c1
// with a CPU quota) and one Guaranteed pod without containers.
func cadvisorTestEnv(t *testing.T) (*Provider, *fakeHost) {
	t.Helper()
	rt := critest.NewFakeRuntimeService()
	p, err := New(Options{Runtime: rt, Images: critest.NewFakeImageService(), NodeName: "node-a", RootDir: t.TempDir(),
		PodsCgroup: "/kubepods", RuntimeCgroup: "/system.slice/docker.service", Logger: zaptest.NewLogger(t),
		OOMKills: fakeOOMs{"/kubepods/burstable/podu1/c1": 1, "/": 3},
		Pods: podList{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox:1"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeHost(t)
	for _, h := range []string{"cpu", "cpuacct", "memory", "blkio"} {
		f.mount("cg/"+h, "cgroup", "rw,"+h)
	}
	f.write("proc/meminfo", testMeminfo)
	f.write("proc/cpuinfo", "processor\t: 0\nphysical id\t: 0\ncore id\t\t: 0\n\nprocessor\t: 1\nphysical id\t: 0\ncore id\t\t: 1\n")
	f.write("proc/1/net/dev", testNetDev)
	f.write("proc/42/net/dev", testNetDev)
	f.v1Cgroup("", "5000000000", "-1", "100000")
	f.v1Cgroup("/kubepods", "4000000000", "-1", "50000")
	f.v1Cgroup("/system.slice/docker.service", "7000000000", "-1", "50000")
	f.v1Cgroup("/kubepods/burstable", "3000000000", "-1", "40000")
	f.v1Cgroup("/kubepods/burstable/podu1", "2000000000", "-1", "30000")
	f.v1Cgroup("/kubepods/burstable/podu1/sb1", "1000000", "-1", "1000")
	f.write("cg/memory/kubepods/burstable/podu1/sb1/cgroup.procs", "42\n43\n")
	f.v1Cgroup("/kubepods/burstable/podu1/c1", "1500000000", "50000", "3000")
	f.v1Cgroup("/kubepods/podu2", "0", "200000", "0")
	p.host = f.reader()
	rt.SetFakeSandboxes([]*critest.FakePodSandbox{sandbox("sb1", "web", "default", "u1", runtimeapi.PodSandboxState_SANDBOX_READY, t0)})
	c1 := container("c1", "sb1", "app", runtimeapi.ContainerState_CONTAINER_RUNNING, t1)
	c1.Image = &runtimeapi.ImageSpec{Image: "sha256:0123", UserSpecifiedImage: "sha256:0123"} // the dockershim's answer
	c1.Labels = map[string]string{"io.kubernetes.container.name": "app", "io.kubernetes.pod.name": "web",
		"io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": "u1"}
	rt.SetFakeContainers([]*critest.FakeContainer{c1})
	return p, f
}

func scrapeCadvisor(t *testing.T, h http.Handler, gz bool) map[string]*dto.MetricFamily {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", nil)
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	body := rec.Body.String()
	if gz {
		if rec.Header().Get("Content-Encoding") != "gzip" {
			t.Fatal("no gzip although accepted")
		}
		r, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		body = string(b)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, body)
	}
	return fams
}

// series finds the series of a family whose labels include want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		ok := true
		for k, v := range want {
			if got[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// TestCadvisorMetrics scrapes the fake host: the rows and their labels, values
// from the v1 files, the cfs and network series only where due, timestamps on
// stats series only, and the machine series.
func TestCadvisorMetrics(t *testing.T) {
	p, _ := cadvisorTestEnv(t)
	rt := p.runtime.(*critest.FakeRuntimeService)
	h := p.CadvisorMetrics(CadvisorOptions{SandboxImage: "pause:3.10"})
	defer func() {
		// Labels are known after the first scrape: the lists are asked once.
		if n := count(rt.GetCalls(), "ListContainers"); n != 1 {
			t.Errorf("ListContainers asked %d times for 2 scrapes, want 1", n)
		}
	}()
	for _, gz := range []bool{false, true} {
		fams := scrapeCadvisor(t, h, gz)
		c1 := map[string]string{"id": "/kubepods/burstable/podu1/c1", "container": "app", "image": "busybox:1",
			"name": "k8s_app_web_default_u1_0", "namespace": "default", "pod": "web"}
		sb1 := map[string]string{"id": "/kubepods/burstable/podu1/sb1", "container": "POD", "image": "pause:3.10",
			"name": "k8s_POD_web_default_u1_0", "namespace": "default", "pod": "web"}
		pod := map[string]string{"id": "/kubepods/burstable/podu1", "container": "", "image": "", "name": "", "namespace": "default", "pod": "web"}
		for _, tc := range []struct {
			desc, family string
			labels       map[string]string
			want         float64 // -1: absent
		}{
			{"root cpu", "container_cpu_usage_seconds_total", map[string]string{"id": "/", "cpu": "total", "pod": "", "name": ""}, 5},
			{"qos cpu", "container_cpu_usage_seconds_total", map[string]string{"id": "/kubepods/burstable", "pod": ""}, 3},
			{"runtime cgroup", "container_cpu_usage_seconds_total", map[string]string{"id": "/system.slice/docker.service", "pod": ""}, 7},
			{"pod cpu", "container_cpu_usage_seconds_total", pod, 2},
			{"container cpu", "container_cpu_usage_seconds_total", c1, 1.5},
			{"zero cpu: no series", "container_cpu_usage_seconds_total", map[string]string{"id": "/kubepods/podu2"}, -1},
			{"user", "container_cpu_user_seconds_total", c1, 1.5},
			{"system", "container_cpu_system_seconds_total", c1, 0.5},
			{"cfs with a quota", "container_cpu_cfs_throttled_seconds_total", c1, 3},
			{"cfs periods", "container_cpu_cfs_periods_total", c1, 10},
			{"no cfs without a quota", "container_cpu_cfs_periods_total", pod, -1},
			{"quota", "container_spec_cpu_quota", c1, 50000},
			{"no quota", "container_spec_cpu_quota", pod, -1},
			{"shares", "container_spec_cpu_shares", c1, 2},
			{"working set", "container_memory_working_set_bytes", c1, 2600},
			{"rss", "container_memory_rss", c1, 2000},
			{"cache", "container_memory_cache", c1, 1000},
			{"swap", "container_memory_swap", c1, 5},
			{"mapped", "container_memory_mapped_file", c1, 300},
			{"max usage", "container_memory_max_usage_bytes", c1, 9000},
			{"oom: the watcher's count of the container's cgroup", "container_oom_events_total", c1, 1},
			{"oom: system-wide kills are the root's", "container_oom_events_total", map[string]string{"id": "/"}, 3},
			{"oom: a cgroup without kills has 0", "container_oom_events_total", pod, 0},
			{"unlimited memory", "container_spec_memory_limit_bytes", c1, 0},
			{"root limit = MemTotal", "container_spec_memory_limit_bytes", map[string]string{"id": "/"}, 1000 * 1024},
			{"reads", "container_fs_reads_bytes_total", c1, 4096},
			{"writes", "container_fs_writes_bytes_total", c1, 8192},
			{"reads completed", "container_fs_reads_total", c1, 2},
			{"writes completed", "container_fs_writes_total", c1, 3},
			{"blkio async bytes", "container_blkio_device_usage_total", merge(c1, "operation", "Async"), 12288},
			{"blkio discard bytes", "container_blkio_device_usage_total", merge(c1, "operation", "Discard"), 0},
			{"blkio total bytes", "container_blkio_device_usage_total", merge(merge(c1, "operation", "Total"), "major", "254"), 12288},
			{"sandbox network", "container_network_receive_bytes_total", merge(sb1, "interface", "eth0"), 357933332},
			{"sandbox tx packets", "container_network_transmit_packets_total", merge(sb1, "interface", "eth0"), 15644},
			{"no lo", "container_network_receive_bytes_total", map[string]string{"interface": "lo"}, -1},
			{"no network on app containers", "container_network_receive_bytes_total", c1, -1},
			{"root network", "container_network_receive_errors_total", map[string]string{"id": "/", "interface": "eth0"}, 3},
			{"guaranteed pod row", "container_memory_usage_bytes", map[string]string{"id": "/kubepods/podu2", "pod": ""}, 0},
			{"machine cores", "machine_cpu_cores", nil, 2},
			{"machine sockets", "machine_cpu_sockets", nil, 1},
			{"machine memory", "machine_memory_bytes", nil, 1000 * 1024},
			{"scrape error", "container_scrape_error", nil, 0},
		} {
			got := series(fams, tc.family, tc.labels)
			switch {
			case tc.want < 0 && len(got) != 0:
				t.Errorf("%s: %s%v served: %v", tc.desc, tc.family, tc.labels, got)
			case tc.want >= 0 && len(got) != 1:
				t.Errorf("%s: %d series %s%v, want 1", tc.desc, len(got), tc.family, tc.labels)
			case tc.want >= 0 && value(got[0]) != tc.want:
				t.Errorf("%s: %s%v = %v, want %v", tc.desc, tc.family, tc.labels, value(got[0]), tc.want)
			}
		}
		if m := series(fams, "container_memory_usage_bytes", c1); len(m) != 1 || m[0].GetTimestampMs() == 0 {
			t.Errorf("stats series without a timestamp: %v", m)
		}
		for _, name := range []string{"container_spec_cpu_shares", "container_start_time_seconds", "machine_memory_bytes"} {
			if m := fams[name].GetMetric(); len(m) == 0 || m[0].GetTimestampMs() != 0 {
				t.Errorf("%s: %v, want series without timestamps", name, m)
			}
		}
		if n := len(series(fams, "container_blkio_device_usage_total", c1)); n != 6 {
			t.Errorf("%d blkio operation series of c1, want 6 (Async Discard Read Sync Total Write)", n)
		}
		if n := len(fams["container_last_seen"].GetMetric()); n != 8 {
			t.Errorf("%d rows, want 8 (/, the runtime's, kubepods, burstable, podu1, sb1, c1, podu2)", n)
		}
	}
}

// TestCadvisorBlkioLabels: the blkio operation series' labels are written in
// their sorted order, as client_golang's Gather writes them.
func TestCadvisorBlkioLabels(t *testing.T) {
	p, _ := cadvisorTestEnv(t)
	rec := httptest.NewRecorder()
	p.CadvisorMetrics(CadvisorOptions{SandboxImage: "pause:3.10"}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics/cadvisor", nil))
	want := `",id="/kubepods/burstable/podu1/c1",image="busybox:1",major="254",minor="0",name="k8s_app_web_default_u1_0",` +
		`namespace="default",operation="Read",pod="web"} 4096 `
	found := false
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(line, `container_blkio_device_usage_total{container="app",device="`) && strings.Contains(line, want) {
			found = true
		}
	}
	if !found {
		t.Errorf("no line container_blkio_device_usage_total{container=\"app\",device=\"...%s in\n%s", want, rec.Body.String())
	}
}

func merge(m map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for mk, mv := range m {
		out[mk] = mv
	}
	return out
}

func TestCadvisorTextFormat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		v    float64
		want string
	}{
		{0, "0"}, {1, "1"}, {1.5, "1.5"}, {1234567, "1.234567e+06"}, {0.073527108, "0.073527108"},
	} {
		if got := string(appendFloat(nil, tc.v)); got != tc.want {
			t.Errorf("appendFloat(%v) = %s, want %s", tc.v, got, tc.want)
		}
	}
	l := newRowLabels("c", `/a"b`, "img", "n", "ns", "p")
	if want := `container="c",id="/a\"b",image="img",name="n",namespace="ns",pod="p"`; l.full != want {
		t.Errorf("labels %s, want %s", l.full, want)
	}
	if got := l.ifacePre + "eth0" + l.ifaceSuf; got != `container="c",id="/a\"b",image="img",interface="eth0",name="n",namespace="ns",pod="p"` {
		t.Errorf("interface labels %s", got)
	}
	if got := l.devPre + "/dev/vda" + l.devSuf; got != `container="c",device="/dev/vda",id="/a\"b",image="img",name="n",namespace="ns",pod="p"` {
		t.Errorf("device labels %s", got)
	}
	for h, want := range map[string]bool{"gzip": true, "deflate, gzip;q=1.0, *;q=0.5": true, "identity": false, "gzip;q=0": false, "": false} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Accept-Encoding", h)
		if got := acceptsGzip(r); got != want {
			t.Errorf("acceptsGzip(%q) = %v", h, got)
		}
	}
}

// TestCadvisorMetricsV2: on a cgroup v2 host the rows are the cgroup2
// directories (the systemd driver's names here): the root (its memory from
// meminfo, as runc emulates it), the node-allocatable, QoS and pod slices and
// the container scopes, with the container's labels, its figures from
// cpu.stat/memory.current/memory.stat/memory.events and its spec from
// cpu.weight and cpu.max; and the machine series.
func TestCadvisorMetricsV2(t *testing.T) {
	t.Parallel()
	rt := critest.NewFakeRuntimeService()
	p, err := New(Options{Runtime: rt, Images: critest.NewFakeImageService(), NodeName: "node-a",
		RootDir: t.TempDir(), PodsCgroup: "/kubepods.slice", Logger: zaptest.NewLogger(t),
		OOMKills: fakeOOMs{"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu1.slice/docker-c1.scope": 1}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeHost(t)
	f.mount("cg/unified", "cgroup2", "rw")
	f.write("cg/unified/cpu.stat", "usage_usec 100\n")
	f.write("cg/unified/memory.stat", "anon 4096\ninactive_file 1024\n")
	pod := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podu1.slice"
	scope := pod + "/docker-c1.scope"
	for _, d := range []string{"kubepods.slice", "kubepods.slice/kubepods-burstable.slice", pod, scope} {
		f.write("cg/unified/"+d+"/cpu.stat", "usage_usec 2000\nuser_usec 1500\nsystem_usec 500\nnr_periods 3\nnr_throttled 1\nthrottled_usec 7\n")
		f.write("cg/unified/"+d+"/memory.current", "300000\n")
		f.write("cg/unified/"+d+"/memory.stat", "anon 200000\nfile 100000\nfile_mapped 10\ninactive_file 60000\n")
		f.write("cg/unified/"+d+"/cpu.weight", "4\n")
		f.write("cg/unified/"+d+"/cpu.max", "50000 100000\n")
		f.write("cg/unified/"+d+"/memory.max", "67108864\n")
	}
	f.write("proc/meminfo", testMeminfo)
	f.write("proc/1/net/dev", testNetDev)
	p.host = f.reader()
	c1 := container("c1", "sb1", "app", runtimeapi.ContainerState_CONTAINER_RUNNING, t1)
	c1.Labels = map[string]string{"io.kubernetes.container.name": "app", "io.kubernetes.pod.name": "web",
		"io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": "u1"}
	rt.SetFakeSandboxes([]*critest.FakePodSandbox{sandbox("sb1", "web", "default", "u1", runtimeapi.PodSandboxState_SANDBOX_READY, t0)})
	rt.SetFakeContainers([]*critest.FakeContainer{c1})
	fams := scrapeCadvisor(t, p.CadvisorMetrics(CadvisorOptions{}), false)
	if n := len(fams["container_last_seen"].GetMetric()); n != 5 {
		t.Errorf("%d rows, want 5 (root, kubepods.slice, the burstable slice, the pod, the container)", n)
	}
	app := map[string]string{"id": "/" + scope, "container": "app", "pod": "web", "namespace": "default"}
	for name, want := range map[string]float64{
		"container_memory_working_set_bytes":        240000,
		"container_memory_rss":                      200000,
		"container_memory_cache":                    100000,
		"container_cpu_usage_seconds_total":         0.002,
		"container_cpu_cfs_throttled_periods_total": 1,
		"container_oom_events_total":                1,
		"container_spec_cpu_shares":                 80,
		"container_spec_cpu_quota":                  50000,
		"container_spec_memory_limit_bytes":         64 << 20,
	} {
		if m := series(fams, name, app); len(m) != 1 || value(m[0]) != want {
			t.Errorf("%s of the container: %v, want %v", name, m, want)
		}
	}
	if m := series(fams, "container_memory_working_set_bytes", map[string]string{"id": "/", "pod": ""}); len(m) != 1 || value(m[0]) == 0 {
		t.Errorf("root working set (from meminfo): %v", m)
	}
	if m := series(fams, "container_network_receive_bytes_total", map[string]string{"id": "/", "interface": "eth0"}); len(m) != 1 {
		t.Errorf("root network: %v", m)
	}
	if m := series(fams, "machine_memory_bytes", nil); len(m) != 1 || value(m[0]) != 1000*1024 {
		t.Errorf("machine memory: %v", m)
	}
	if m := series(fams, "container_scrape_error", nil); len(m) != 1 || value(m[0]) != 0 {
		t.Errorf("container_scrape_error: %v", m)
	}
}

// TestCadvisorRowsComeAndGo: a removed container cgroup leaves the exposition
// (its held files closed); a new one is labelled after the lists are asked
// again; a failed list marks container_scrape_error and leaves the row with
// only its id.
func TestCadvisorRowsComeAndGo(t *testing.T) {
	p, f := cadvisorTestEnv(t)
	rt := p.runtime.(*critest.FakeRuntimeService)
	h := p.CadvisorMetrics(CadvisorOptions{SandboxImage: "pause:3.10"})
	scrapeCadvisor(t, h, false)
	held := h.(*cadvisor).files.Held()
	for _, hier := range []string{"cpu", "cpuacct", "memory", "blkio"} {
		if err := os.RemoveAll(filepath.Join(f.root, "cg", hier, "kubepods/burstable/podu1/c1")); err != nil {
			t.Fatal(err)
		}
	}
	fams := scrapeCadvisor(t, h, false)
	if m := series(fams, "container_last_seen", map[string]string{"container": "app"}); len(m) != 0 {
		t.Errorf("removed cgroup still served: %v", m)
	}
	if n := h.(*cadvisor).files.Held(); n >= held {
		t.Errorf("%d files held after the removal, %d before", n, held)
	}

	f.v1Cgroup("/kubepods/burstable/podu1/c9", "1", "-1", "1")
	rt.InjectError("ListContainers", errors.New("runtime down"))
	p.now = func() time.Time { return time.Now().Add(time.Minute) } // past cadvisorRelistMin
	fams = scrapeCadvisor(t, h, false)
	if m := series(fams, "container_scrape_error", nil); len(m) != 1 || value(m[0]) != 1 {
		t.Errorf("container_scrape_error after a failed list: %v", m)
	}
	if m := series(fams, "container_last_seen", map[string]string{"id": "/kubepods/burstable/podu1/c9", "pod": "", "name": ""}); len(m) != 1 {
		t.Errorf("unlabelled new row: %v", m)
	}
	c9 := container("c9", "sb1", "late", runtimeapi.ContainerState_CONTAINER_RUNNING, t1)
	c9.Labels = map[string]string{"io.kubernetes.container.name": "late", "io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default"}
	c9.Image = &runtimeapi.ImageSpec{Image: "late:1"}
	rt.SetFakeContainers([]*critest.FakeContainer{c9})
	p.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	fams = scrapeCadvisor(t, h, false)
	if m := series(fams, "container_last_seen", map[string]string{"container": "late", "image": "late:1", "name": "k8s_late_web_default_u1_0"}); len(m) != 1 {
		t.Errorf("new container not labelled after a relist: %v", m)
	}
	if m := series(fams, "container_scrape_error", nil); len(m) != 1 || value(m[0]) != 0 {
		t.Errorf("container_scrape_error: %v", m)
	}
}
