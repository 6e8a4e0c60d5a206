package topologymanager

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubelet-dockershim/kubelet/internal/promreg"
)

// metrics are upstream's topology manager series (pkg/kubelet/metrics).
type metrics struct {
	requests, errors prometheus.Counter
	duration         prometheus.Histogram
	alignedOK        *prometheus.CounterVec
	alignedFailed    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "topology_manager_admission_requests_total",
			Help: "[ALPHA] The number of admission requests where resources have to be aligned."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "topology_manager_admission_errors_total",
			Help: "[ALPHA] The number of admission request failures where resources could not be aligned."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Subsystem: "kubelet", Name: "topology_manager_admission_duration_ms",
			Help: "[ALPHA] Duration in milliseconds to serve a pod admission request.", Buckets: prometheus.ExponentialBuckets(.05, 2, 15)}),
	}
	var err error
	if m.alignedOK, m.alignedFailed, err = AlignedCounters(reg); err != nil {
		return nil, err
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.errors, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("topologymanager: register metrics: %w", err)
		}
	}
	return m, nil
}

// AlignedCounters are upstream's container_aligned_compute_resources_count
// and _failure_count (labels boundary, scope), shared by the managers that
// align resources (this one: numa_node; the CPU manager: physical_cpu and
// uncore_cache): the first caller registers them with reg, later ones get
// the registered ones. A nil reg gives unregistered counters.
func AlignedCounters(reg prometheus.Registerer) (ok, failed *prometheus.CounterVec, err error) {
	ok = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "container_aligned_compute_resources_count",
		Help: "[ALPHA] Cumulative number of aligned compute resources allocated to containers by alignment type."}, []string{"boundary", "scope"})
	failed = prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "container_aligned_compute_resources_failure_count",
		Help: "[ALPHA] Cumulative number of failures to allocate aligned compute resources to containers by alignment type."}, []string{"boundary", "scope"})
	if reg == nil {
		return ok, failed, nil
	}
	if ok, err = promreg.Register(reg, ok); err != nil {
		return nil, nil, fmt.Errorf("topologymanager: register metrics: %w", err)
	}
	if failed, err = promreg.Register(reg, failed); err != nil {
		return nil, nil, fmt.Errorf("topologymanager: register metrics: %w", err)
	}
	return ok, failed, nil
}

// initAligned shows the NUMA alignment series at 0 (upstream's
// initializeMetrics), for both scopes.
func (m *metrics) initAligned() {
	for _, scope := range []string{ScopeContainer, ScopePod} {
		m.alignedOK.WithLabelValues("numa_node", scope).Add(0)
		m.alignedFailed.WithLabelValues("numa_node", scope).Add(0)
	}
}

// aligned counts a NUMA alignment (single-numa-node only: the one policy
// that guarantees it).
func (m *metrics) aligned(scope, policy string, ok bool) {
	if policy != PolicySingleNUMANode {
		return
	}
	if ok {
		m.alignedOK.WithLabelValues("numa_node", scope).Inc()
	} else {
		m.alignedFailed.WithLabelValues("numa_node", scope).Inc()
	}
}
