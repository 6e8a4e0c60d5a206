package stats

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// resourceScrapeTimeout bounds the Summary one /metrics/resource scrape computes.
const resourceScrapeTimeout = time.Minute

// ResourceMetrics is the registry behind /metrics/resource: upstream's resource
// metrics collector (pkg/kubelet/metrics/collectors/resource_metrics.go), fed by
// Summary(ctx, true) at each scrape. Names, labels and help texts (with the stability
// prefix component-base adds) are upstream's; CPU, memory and swap samples carry the
// time they were read.
func (p *Provider) ResourceMetrics() prometheus.Gatherer { return p.registry }

// resourceCollector is a custom collector, so that gone containers and pods leave no
// series behind.
type resourceCollector struct {
	p *Provider

	nodeCPU, nodeMemory, nodeSwap                                    *prometheus.Desc
	containerCPU, containerMemory, containerSwap, containerSwapLimit *prometheus.Desc
	containerStart                                                   *prometheus.Desc
	podCPU, podMemory, podSwap                                       *prometheus.Desc
	scrapeError, resourceScrapeError                                 *prometheus.Desc
}

func newResourceCollector(p *Provider) *resourceCollector {
	containerLabels := []string{"container", "pod", "namespace"}
	podLabels := []string{"pod", "namespace"}
	d := prometheus.NewDesc
	return &resourceCollector{
		p:       p,
		nodeCPU: d("node_cpu_usage_seconds_total", "[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil),
		nodeMemory: d("node_memory_working_set_bytes",
			"[STABLE] Current working set of the node in bytes", nil, nil),
		nodeSwap: d("node_swap_usage_bytes",
			"[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", nil, nil),
		containerCPU: d("container_cpu_usage_seconds_total",
			"[STABLE] Cumulative cpu time consumed by the container in core-seconds", containerLabels, nil),
		containerMemory: d("container_memory_working_set_bytes",
			"[STABLE] Current working set of the container in bytes", containerLabels, nil),
		containerSwap: d("container_swap_usage_bytes",
			"[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", containerLabels, nil),
		containerSwapLimit: d("container_swap_limit_bytes",
			"[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems", containerLabels, nil),
		containerStart: d("container_start_time_seconds",
			"[STABLE] Start time of the container since unix epoch in seconds", containerLabels, nil),
		podCPU: d("pod_cpu_usage_seconds_total",
			"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", podLabels, nil),
		podMemory: d("pod_memory_working_set_bytes",
			"[STABLE] Current working set of the pod in bytes", podLabels, nil),
		podSwap: d("pod_swap_usage_bytes",
			"[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", podLabels, nil),
		scrapeError: d("scrape_error",
			"[ALPHA] (Deprecated since 1.29.0) 1 if there was an error while getting container metrics, 0 otherwise", nil, nil),
		resourceScrapeError: d("resource_scrape_error",
			"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.nodeCPU, c.nodeMemory, c.nodeSwap, c.containerStart, c.containerCPU, c.containerMemory,
		c.containerSwap, c.containerSwapLimit, c.podCPU, c.podMemory, c.podSwap, c.scrapeError, c.resourceScrapeError,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), resourceScrapeTimeout)
	defer cancel()
	var errorCount float64
	defer func() {
		ch <- prometheus.MustNewConstMetric(c.scrapeError, prometheus.GaugeValue, errorCount)
		ch <- prometheus.MustNewConstMetric(c.resourceScrapeError, prometheus.GaugeValue, errorCount)
	}()
	s, err := c.p.Summary(ctx, true)
	if err != nil {
		errorCount = 1
		c.p.logger.Error("get the summary for /metrics/resource", zap.Error(err))
		return
	}
	c.collectNode(ch, s.Node)
	for _, pod := range s.Pods {
		for _, ct := range pod.Containers {
			c.collectContainer(ch, pod, ct)
		}
		c.collectPod(ch, pod)
	}
}

// stamped sends a const metric carrying sample time t.
func stamped(ch chan<- prometheus.Metric, t time.Time, d *prometheus.Desc, vt prometheus.ValueType, v float64, labels ...string) {
	ch <- prometheus.NewMetricWithTimestamp(t, prometheus.MustNewConstMetric(d, vt, v, labels...))
}

func seconds(nanos uint64) float64 { return float64(nanos) / float64(time.Second) }

func (c *resourceCollector) collectNode(ch chan<- prometheus.Metric, n statsapi.NodeStats) {
	if n.CPU != nil && n.CPU.UsageCoreNanoSeconds != nil {
		stamped(ch, n.CPU.Time.Time, c.nodeCPU, prometheus.CounterValue, seconds(*n.CPU.UsageCoreNanoSeconds))
	}
	if n.Memory != nil && n.Memory.WorkingSetBytes != nil {
		stamped(ch, n.Memory.Time.Time, c.nodeMemory, prometheus.GaugeValue, float64(*n.Memory.WorkingSetBytes))
	}
	if n.Swap != nil && n.Swap.SwapUsageBytes != nil {
		at := n.Swap.Time.Time
		if n.Memory != nil {
			at = n.Memory.Time.Time // upstream stamps node swap with the memory sample's time
		}
		stamped(ch, at, c.nodeSwap, prometheus.GaugeValue, float64(*n.Swap.SwapUsageBytes))
	}
}

func (c *resourceCollector) collectContainer(ch chan<- prometheus.Metric, pod statsapi.PodStats, s statsapi.ContainerStats) {
	labels := []string{s.Name, pod.PodRef.Name, pod.PodRef.Namespace}
	if s.StartTime.Unix() > 0 {
		ch <- prometheus.MustNewConstMetric(c.containerStart, prometheus.GaugeValue, float64(s.StartTime.UnixNano())/float64(time.Second), labels...)
	}
	if s.CPU != nil && s.CPU.UsageCoreNanoSeconds != nil {
		stamped(ch, s.CPU.Time.Time, c.containerCPU, prometheus.CounterValue, seconds(*s.CPU.UsageCoreNanoSeconds), labels...)
	}
	if s.Memory != nil && s.Memory.WorkingSetBytes != nil {
		stamped(ch, s.Memory.Time.Time, c.containerMemory, prometheus.GaugeValue, float64(*s.Memory.WorkingSetBytes), labels...)
	}
	if s.Swap == nil {
		return
	}
	if s.Swap.SwapUsageBytes != nil {
		stamped(ch, s.Swap.Time.Time, c.containerSwap, prometheus.GaugeValue, float64(*s.Swap.SwapUsageBytes), labels...)
	}
	if s.Swap.SwapAvailableBytes != nil {
		limit := float64(*s.Swap.SwapAvailableBytes)
		if s.Swap.SwapUsageBytes != nil {
			limit += float64(*s.Swap.SwapUsageBytes)
		}
		stamped(ch, s.Swap.Time.Time, c.containerSwapLimit, prometheus.GaugeValue, limit, labels...)
	}
}

func (c *resourceCollector) collectPod(ch chan<- prometheus.Metric, pod statsapi.PodStats) {
	labels := []string{pod.PodRef.Name, pod.PodRef.Namespace}
	if pod.CPU != nil && pod.CPU.UsageCoreNanoSeconds != nil {
		stamped(ch, pod.CPU.Time.Time, c.podCPU, prometheus.CounterValue, seconds(*pod.CPU.UsageCoreNanoSeconds), labels...)
	}
	if pod.Memory != nil && pod.Memory.WorkingSetBytes != nil {
		stamped(ch, pod.Memory.Time.Time, c.podMemory, prometheus.GaugeValue, float64(*pod.Memory.WorkingSetBytes), labels...)
	}
	if pod.Swap != nil && pod.Swap.SwapUsageBytes != nil {
		stamped(ch, pod.Swap.Time.Time, c.podSwap, prometheus.GaugeValue, float64(*pod.Swap.SwapUsageBytes), labels...)
	}
}
