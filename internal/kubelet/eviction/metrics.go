package eviction

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are upstream's eviction series.
type metrics struct {
	evictions *prometheus.CounterVec
	statsAge  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evictions",
			Help: "[ALPHA] Cumulative number of pod evictions by eviction signal",
		}, []string{"eviction_signal"}),
		statsAge: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "eviction_stats_age_seconds",
			Help:    "[ALPHA] Time between when stats are collected, and when pod is evicted based on those stats by eviction signal",
			Buckets: prometheus.DefBuckets,
		}, []string{"eviction_signal"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.evictions, m.statsAge} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("eviction: register metrics: %w", err)
		}
	}
	return m, nil
}
