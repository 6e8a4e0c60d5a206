package stats

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// gatherText renders a gatherer in the Prometheus text format.
func gatherText(t *testing.T, g prometheus.Gatherer) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// wantResourceMetrics is the test env's /metrics/resource at t0+2m: CPU, memory and
// swap carry their sample times (t1 = 1700000060 from the runtime, 1700000120 for the
// node and for what the runtime left out), start times none.
const wantResourceMetrics = `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2 1700000060000
container_cpu_usage_seconds_total{container="side",namespace="default",pod="web"} 0 1700000120000
# HELP container_memory_working_set_bytes [STABLE] Current working set of the container in bytes
# TYPE container_memory_working_set_bytes gauge
container_memory_working_set_bytes{container="app",namespace="default",pod="web"} 3000 1700000060000
container_memory_working_set_bytes{container="side",namespace="default",pod="web"} 100 1700000060000
# HELP container_start_time_seconds [STABLE] Start time of the container since unix epoch in seconds
# TYPE container_start_time_seconds gauge
container_start_time_seconds{container="app",namespace="default",pod="web"} 1.70000006e+09
container_start_time_seconds{container="side",namespace="default",pod="web"} 1.70000006e+09
# HELP container_swap_limit_bytes [ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems
# TYPE container_swap_limit_bytes gauge
container_swap_limit_bytes{container="app",namespace="default",pod="web"} 0 1700000120000
container_swap_limit_bytes{container="side",namespace="default",pod="web"} 0 1700000120000
# HELP container_swap_usage_bytes [ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems
# TYPE container_swap_usage_bytes gauge
container_swap_usage_bytes{container="app",namespace="default",pod="web"} 0 1700000120000
container_swap_usage_bytes{container="side",namespace="default",pod="web"} 0 1700000120000
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 1.56 1700000120000
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 512000 1700000120000
# HELP node_swap_usage_bytes [ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems
# TYPE node_swap_usage_bytes gauge
node_swap_usage_bytes 51200 1700000120000
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="default",pod="web"} 3 1700000060000
pod_cpu_usage_seconds_total{namespace="kube-system",pod="db"} 1e-09 1700000060000
# HELP pod_memory_working_set_bytes [STABLE] Current working set of the pod in bytes
# TYPE pod_memory_working_set_bytes gauge
pod_memory_working_set_bytes{namespace="default",pod="web"} 5000 1700000060000
# HELP pod_swap_usage_bytes [ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems
# TYPE pod_swap_usage_bytes gauge
pod_swap_usage_bytes{namespace="default",pod="web"} 0 1700000120000
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
# HELP scrape_error [ALPHA] (Deprecated since 1.29.0) 1 if there was an error while getting container metrics, 0 otherwise
# TYPE scrape_error gauge
scrape_error 0
`

func TestResourceMetrics(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	now := t0.Add(2 * time.Minute)
	e.p.now = func() time.Time { return now }
	if got := gatherText(t, e.p.ResourceMetrics()); got != wantResourceMetrics {
		t.Errorf("metrics:\n%s\nwant:\n%s", got, wantResourceMetrics)
	}
	if calls := e.rt.GetCalls(); count(calls, "ListContainerStats") != 0 || len(e.img.Called) != 0 {
		t.Errorf("a scrape made calls beyond the CPU and memory summary: %v %v", calls, e.img.Called)
	}
}

func TestResourceMetricsScrapeError(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.rt.InjectError("ListContainers", errors.New("boom"))
	got := gatherText(t, e.p.ResourceMetrics())
	want := "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n" +
		"# TYPE resource_scrape_error gauge\nresource_scrape_error 1\n"
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "\nscrape_error 1\n") {
		t.Errorf("metrics after a failed summary:\n%s", got)
	}
	// The next scrape works again and drops nothing it should report.
	if got := gatherText(t, e.p.ResourceMetrics()); !strings.Contains(got, `container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"} 2 `) {
		t.Errorf("metrics after recovery:\n%s", got)
	}
}
