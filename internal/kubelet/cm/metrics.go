package cm

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// newDurations builds upstream's kubelet_cgroup_manager_duration_seconds
// and registers it with reg (nil: not registered).
func newDurations(reg prometheus.Registerer) (*prometheus.HistogramVec, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "kubelet", Name: "cgroup_manager_duration_seconds",
		Help:    "[ALPHA] Duration in seconds for cgroup manager operations. Broken down by method.",
		Buckets: prometheus.DefBuckets,
	}, []string{"operation_type"})
	if reg != nil {
		if err := reg.Register(h); err != nil {
			return nil, fmt.Errorf("cm: register metrics: %w", err)
		}
	}
	return h, nil
}

// create, update and destroy are the cgroup driver's operations, timed
// under upstream's operation types.
func (m *Manager) create(n cgroups.Name, rc *cgroups.Resources) error {
	defer m.observe("create", time.Now())
	return m.cg.Create(n, rc)
}

func (m *Manager) update(n cgroups.Name, rc *cgroups.Resources) error {
	defer m.observe("update", time.Now())
	return m.cg.Update(n, rc)
}

func (m *Manager) destroy(n cgroups.Name) error {
	defer m.observe("destroy", time.Now())
	return m.cg.Destroy(n)
}

func (m *Manager) observe(op string, start time.Time) {
	m.durations.WithLabelValues(op).Observe(time.Since(start).Seconds())
}
