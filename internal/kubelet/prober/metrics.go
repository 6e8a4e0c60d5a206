package prober

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// Upstream's result label values of prober_probe_total.
const (
	probeResultSuccessful = "successful"
	probeResultFailed     = "failed"
	probeResultUnknown    = "unknown"
)

// probeMetrics are upstream's /metrics/probes series: prober_probe_total and
// prober_probe_duration_seconds, in a registry of their own.
type probeMetrics struct {
	registry *prometheus.Registry
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newProbeMetrics() *probeMetrics {
	labels := []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"}
	m := &probeMetrics{
		registry: prometheus.NewRegistry(),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "prober", Name: "probe_total",
			Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "prober", Name: "probe_duration_seconds",
			Help:    "Duration in seconds for a probe response.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"probe_type", "container", "pod", "namespace"}),
	}
	m.registry.MustRegister(m.total, m.duration)
	return m
}

// observe counts one probe run (err: it could not run).
func (m *probeMetrics) observe(t ProbeType, pod *v1.Pod, container string, result Result, err error, took time.Duration) {
	label := probeResultUnknown
	switch {
	case err != nil:
	case result == Success:
		label = probeResultSuccessful
	case result == Failure:
		label = probeResultFailed
	}
	m.total.WithLabelValues(t.String(), label, container, pod.Name, pod.Namespace, string(pod.UID)).Inc()
	if err == nil {
		m.duration.WithLabelValues(t.String(), container, pod.Name, pod.Namespace).Observe(took.Seconds())
	}
}

// forget drops the series of a container's probe when its worker stops.
func (m *probeMetrics) forget(t ProbeType, pod *v1.Pod, container string) {
	for _, r := range []string{probeResultSuccessful, probeResultFailed, probeResultUnknown} {
		m.total.DeleteLabelValues(t.String(), r, container, pod.Name, pod.Namespace, string(pod.UID))
	}
	m.duration.DeleteLabelValues(t.String(), container, pod.Name, pod.Namespace)
}

// Metrics returns the registry of the probe metrics (/metrics/probes).
func (m *Manager) Metrics() prometheus.Gatherer { return m.metrics.registry }
