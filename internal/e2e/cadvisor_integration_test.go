//go:build linux

package e2e

import (
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
)

// TestIntegrationCadvisor runs a pod with a CPU limit that burns some CPU and
// receives some traffic, then reads /metrics/cadvisor from the read-only port:
// every series of testdata/cadvisor_metrics.txt with its type, help and label
// names; the root row; the pod row with pod and namespace; the app container's
// row with its Docker name, image and CPU usage; the sandbox row
// (container="POD") with the pod's eth0 counters; container_oom_events_total
// 1 on a container whose child the kernel OOM-killed (the row of the killed
// task's cgroup, as the kernel log names it) and 0 on the busy one; the
// filesystem series (the diskstats ones of the root's partitions, zeros on the
// container's); gzip when asked for.
func TestIntegrationCadvisor(t *testing.T) {
	n := newNode(t)
	ro := freePort(t)
	n.extra = append(n.extra, "--read-only-port="+strconv.Itoa(ro))
	n.start()
	n.writeManifest("cad.yaml", manifest("cad", `  containers:
  - name: busy
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "head -c 1048576 /dev/zero > /big; echo logged; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; exec sleep 3600"]
    resources:
      limits: {cpu: 500m, memory: 64Mi}
  - name: survivor
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "head -c 200m /dev/zero | tail; exec sleep 3600"]
    resources:
      limits: {memory: 16Mi}
`))
	p := n.waitPod("cad", podStartTimeout, "running and ready", runningAndReady)
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics/cadvisor", ro)
	pod, ns := p.Name, p.Namespace
	uid := string(p.UID)

	var fams map[string]*dto.MetricFamily
	var problems []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		sendTraffic(p)
		fams = scrapeCadvisorURL(t, url, false)
		problems = cadvisorRowProblems(fams, pod, ns, uid)
		if len(problems) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics/cadvisor after 60s:\n%s", strings.Join(problems, "\n"))
		}
		time.Sleep(time.Second)
	}
	checkFamilies(t, "/metrics/cadvisor", fams, readMetricNames(t, "cadvisor_metrics.txt"), func(when string) bool { return when == "always" })
	// The busy container's filesystem: its writable layer (the 1 MiB /big) and
	// its log, measured every minute by the shim and by the kubelet's cAdvisor.
	deadline = time.Now().Add(150 * time.Second)
	for {
		problems = cadvisorFsProblems(fams, pod)
		if len(problems) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics/cadvisor filesystem series after 150s:\n%s", strings.Join(problems, "\n"))
		}
		time.Sleep(5 * time.Second)
		fams = scrapeCadvisorURL(t, url, false)
	}
	// The same exposition gzipped (Prometheus asks for it).
	if gz := scrapeCadvisorURL(t, url, true); len(cadvisorRowProblems(gz, pod, ns, uid)) != 0 {
		t.Errorf("gzipped exposition differs: %v", cadvisorRowProblems(gz, pod, ns, uid))
	}
}

// sendTraffic makes the pod's eth0 receive a TCP SYN (answered with a reset).
func sendTraffic(p *v1.Pod) {
	if p.Status.PodIP == "" {
		return
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort(p.Status.PodIP, "1"), time.Second)
	if err == nil {
		_ = c.Close()
	}
}

func scrapeCadvisorURL(t *testing.T, url string, gz bool) map[string]*dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	// DisableCompression: the transport would otherwise gunzip on its own.
	c := http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableCompression: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	var body io.Reader = resp.Body
	if gz {
		if resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("Content-Encoding %q, want gzip", resp.Header.Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = zr
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(body)
	if err != nil {
		t.Fatalf("parse /metrics/cadvisor: %v", err)
	}
	return fams
}

// cadvisorRowProblems lists what the rows lack: "/", the pod row, the busy
// container (CPU used, Docker name, image) and the sandbox with eth0 traffic.
func cadvisorRowProblems(fams map[string]*dto.MetricFamily, pod, ns, uid string) []string {
	var out []string
	find := func(family string, want map[string]string) *dto.Metric {
		for _, m := range fams[family].GetMetric() {
			ok := true
			for k, v := range want {
				if labelValue(m, k) != v {
					ok = false
				}
			}
			if ok {
				return m
			}
		}
		return nil
	}
	if find("container_memory_usage_bytes", map[string]string{"id": "/", "pod": "", "container": "", "name": "", "image": ""}) == nil {
		out = append(out, `no root row id="/"`)
	}
	podRow := find("container_memory_usage_bytes", map[string]string{"pod": pod, "namespace": ns, "container": "", "name": "", "image": ""})
	if podRow == nil || !strings.HasSuffix(labelValue(podRow, "id"), "/pod"+uid) {
		out = append(out, fmt.Sprintf("no pod row (id .../pod%s, container, name and image empty): %v", uid, podRow))
	}
	busy := find("container_cpu_usage_seconds_total", map[string]string{"pod": pod, "namespace": ns, "container": "busy", "cpu": "total",
		"image": busyboxImage})
	switch {
	case busy == nil:
		out = append(out, fmt.Sprintf("no busy container row with image %s; rows of pod %s: %v", busyboxImage, pod,
			rowsOf(fams["container_last_seen"], pod)))
	case !strings.HasPrefix(labelValue(busy, "name"), "k8s_busy_"+pod+"_"+ns+"_"+uid+"_"):
		out = append(out, "busy container name "+labelValue(busy, "name"))
	case busy.GetCounter().GetValue() <= 0:
		out = append(out, "busy container used no CPU")
	}
	if find("container_cpu_cfs_periods_total", map[string]string{"pod": pod, "container": "busy"}) == nil {
		out = append(out, "no cfs series for the busy container (it has a CPU limit)")
	}
	rx := find("container_network_receive_bytes_total", map[string]string{"pod": pod, "namespace": ns, "container": "POD",
		"interface": "eth0", "image": pauseImage})
	switch {
	case rx == nil:
		out = append(out, "no eth0 receive series on the sandbox row (container=POD)")
	case !strings.HasPrefix(labelValue(rx, "name"), "k8s_POD_"+pod+"_"+ns+"_"+uid+"_"):
		out = append(out, "sandbox name "+labelValue(rx, "name"))
	case rx.GetCounter().GetValue() <= 0:
		out = append(out, "the sandbox's eth0 received nothing")
	}
	if find("container_network_receive_bytes_total", map[string]string{"container": "busy"}) != nil {
		out = append(out, "the app container carries network series")
	}
	for container, want := range map[string]float64{"survivor": 1, "busy": 0} {
		m := find("container_oom_events_total", map[string]string{"pod": pod, "namespace": ns, "container": container})
		if got := m.GetCounter().GetValue(); m == nil || got != want {
			out = append(out, fmt.Sprintf("container_oom_events_total of %s: %v, want %v", container, m, want))
		}
	}
	return out
}

// cadvisorFsProblems lists what the filesystem series lack: the root row's
// partitions and the busy container's usage (at least its 1 MiB file) and
// limit on the same device.
func cadvisorFsProblems(fams map[string]*dto.MetricFamily, pod string) []string {
	var out []string
	root := 0
	for _, m := range fams["container_fs_limit_bytes"].GetMetric() {
		if labelValue(m, "id") == "/" && labelValue(m, "device") != "" && m.GetGauge().GetValue() > 0 {
			root++
		}
	}
	if root == 0 {
		out = append(out, "no container_fs_limit_bytes of the root row")
	}
	var usage, limit *dto.Metric
	for _, m := range fams["container_fs_usage_bytes"].GetMetric() {
		if labelValue(m, "pod") == pod && labelValue(m, "container") == "busy" {
			usage = m
		}
	}
	if usage == nil {
		return append(out, fmt.Sprintf("no container_fs_usage_bytes of the busy container; series of the pod: %v",
			rowsOf(fams["container_fs_usage_bytes"], pod)))
	}
	for _, m := range fams["container_fs_limit_bytes"].GetMetric() {
		if labelValue(m, "id") == labelValue(usage, "id") && labelValue(m, "device") == labelValue(usage, "device") {
			limit = m
		}
	}
	if v := usage.GetGauge().GetValue(); v < 1<<20 {
		out = append(out, fmt.Sprintf("busy container usage %v, want at least its 1 MiB file", v))
	}
	if limit == nil || limit.GetGauge().GetValue() <= usage.GetGauge().GetValue() {
		out = append(out, fmt.Sprintf("busy container limit %v on device %q", limit, labelValue(usage, "device")))
	}
	if fams["container_fs_usage_bytes"] != nil {
		for _, m := range fams["container_fs_usage_bytes"].GetMetric() {
			if labelValue(m, "pod") == pod && labelValue(m, "container") == "POD" {
				out = append(out, "the sandbox carries filesystem series")
			}
		}
	}
	return append(out, diskstatsProblems(fams, usage)...)
}

// diskstatsProblems checks the diskstats series: one per filesystem of the
// root row, and a zero on the container's filesystem (usage's id and device).
func diskstatsProblems(fams map[string]*dto.MetricFamily, usage *dto.Metric) []string {
	var out []string
	for _, m := range fams["container_fs_limit_bytes"].GetMetric() {
		if dev := labelValue(m, "device"); labelValue(m, "id") == "/" && deviceSeries(fams["container_fs_io_time_weighted_seconds_total"], "/", dev) == nil {
			out = append(out, fmt.Sprintf("no container_fs_io_time_weighted_seconds_total of the root row's %q", dev))
		}
	}
	id, dev := labelValue(usage, "id"), labelValue(usage, "device")
	for _, name := range []string{"container_fs_sector_reads_total", "container_fs_reads_merged_total", "container_fs_io_time_seconds_total"} {
		if m := deviceSeries(fams[name], id, dev); m == nil || m.GetCounter().GetValue() != 0 {
			out = append(out, fmt.Sprintf("busy container %s on %q: %v, want 0", name, dev, m))
		}
	}
	return out
}

// deviceSeries is a family's series of row id and device dev, nil if none.
func deviceSeries(mf *dto.MetricFamily, id, dev string) *dto.Metric {
	for _, m := range mf.GetMetric() {
		if labelValue(m, "id") == id && labelValue(m, "device") == dev {
			return m
		}
	}
	return nil
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// rowsOf lists the label sets of a family's series of pod (for failures).
func rowsOf(mf *dto.MetricFamily, pod string) []string {
	var out []string
	for _, m := range mf.GetMetric() {
		if labelValue(m, "pod") == pod {
			out = append(out, fmt.Sprint(m.GetLabel()))
		}
	}
	return out
}
