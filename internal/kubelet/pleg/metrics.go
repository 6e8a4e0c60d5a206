package pleg

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// metrics are upstream's PLEG series (pkg/kubelet/metrics), with its names,
// help texts (served with the "[ALPHA] " stability prefix) and buckets.
type metrics struct {
	relistDuration    prometheus.Histogram
	relistInterval    prometheus.Histogram
	lastSeen          prometheus.Gauge
	runningPods       prometheus.Gauge
	runningContainers *prometheus.GaugeVec
	connErrors        prometheus.Counter
	connSuccess       prometheus.Counter
	connLatency       prometheus.Histogram
}

// newMetrics builds the series and registers them with reg (nil: not
// registered). The evented PLEG's series are registered with the generic
// ones, as upstream does, so they read 0 while the event stream is not used.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		relistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_duration_seconds",
			Help: "[ALPHA] Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets,
		}),
		relistInterval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_interval_seconds",
			Help: "[ALPHA] Interval in seconds between relisting in PLEG.", Buckets: prometheus.DefBuckets,
		}),
		lastSeen: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "pleg_last_seen_seconds",
			Help: "[ALPHA] Timestamp in seconds when PLEG was last seen active.",
		}),
		runningPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "running_pods",
			Help: "[ALPHA] Number of pods that have a running pod sandbox",
		}),
		runningContainers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "running_containers",
			Help: "[ALPHA] Number of containers currently running",
		}, []string{"container_state"}),
		connErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evented_pleg_connection_error_count",
			Help: "[ALPHA] The number of errors encountered during the establishment of streaming connection with the CRI runtime.",
		}),
		connSuccess: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evented_pleg_connection_success_count",
			Help: "[ALPHA] The number of times a streaming client was obtained to receive CRI Events.",
		}),
		connLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "evented_pleg_connection_latency_seconds",
			Help:    "[ALPHA] The latency of streaming connection with the CRI runtime, measured in seconds.",
			Buckets: prometheus.DefBuckets,
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.relistDuration, m.relistInterval, m.lastSeen, m.runningPods,
		m.runningContainers, m.connErrors, m.connSuccess, m.connLatency} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("pleg: register metrics: %w", err)
		}
	}
	return m, nil
}

// observeRunning sets kubelet_running_pods (pods with a running sandbox) and
// kubelet_running_containers by state from one relist. As upstream, only the
// states present are set: a state that drops to none keeps its last value.
func (m *metrics) observeRunning(pods []*kubecontainer.Pod) {
	running := 0
	byState := map[kubecontainer.State]int{}
	for _, p := range pods {
		for _, sb := range p.Sandboxes {
			if sb.State == kubecontainer.StateRunning {
				running++
				break
			}
		}
		for _, c := range p.Containers {
			byState[c.State]++
		}
	}
	m.runningPods.Set(float64(running))
	for state, n := range byState {
		m.runningContainers.WithLabelValues(string(state)).Set(float64(n))
	}
}
