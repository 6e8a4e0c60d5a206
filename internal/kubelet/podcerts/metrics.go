package podcerts

import "github.com/prometheus/client_golang/prometheus"

// statesDesc is upstream's kubelet_podcertificate_states.
var statesDesc = prometheus.NewDesc("kubelet_podcertificate_states",
	"[ALPHA] Gauge vector reporting the number of pod certificate projected volume sources, faceted by signer_name and state.",
	[]string{"signer_name", "state"}, nil)

// statesCollector reports the tracked projections by signer and state
// (not_yet_issued, fresh, overdue_for_refresh, expired, denied, failed).
type statesCollector struct{ m *Manager }

func (c statesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- statesDesc }

func (c statesCollector) Collect(ch chan<- prometheus.Metric) {
	type labels struct{ signer, state string }
	now := c.m.clock.Now()
	counts := map[labels]int{}
	c.m.mu.Lock()
	for _, rec := range c.m.records {
		counts[labels{rec.signer, rec.state.metricState(now)}]++
	}
	c.m.mu.Unlock()
	for l, n := range counts {
		ch <- prometheus.MustNewConstMetric(statesDesc, prometheus.GaugeValue, float64(n), l.signer, l.state)
	}
}
