package podworkers

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// newWorkerDuration builds upstream's kubelet_pod_worker_duration_seconds
// and registers it with reg (nil: not registered).
func newWorkerDuration(reg prometheus.Registerer) (*prometheus.HistogramVec, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "kubelet", Name: "pod_worker_duration_seconds",
		Help:    "[ALPHA] Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
		Buckets: prometheus.DefBuckets,
	}, []string{"operation_type"})
	if reg != nil {
		if err := reg.Register(h); err != nil {
			return nil, fmt.Errorf("podworkers: register metrics: %w", err)
		}
	}
	return h, nil
}

// workTerminated is the operation_type upstream gives the work that finishes
// a pod (and a pod that could never start).
const workTerminated = "terminated"
