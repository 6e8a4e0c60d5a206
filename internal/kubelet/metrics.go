package kubelet

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// podStartupDurationBuckets are upstream's buckets of the pod start series
// (pkg/kubelet/metrics).
var podStartupDurationBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// syncMetrics are the upstream series the pod sync records.
type syncMetrics struct {
	podStart    prometheus.Histogram // kubelet_pod_start_duration_seconds
	workerStart prometheus.Histogram // kubelet_pod_worker_start_duration_seconds
}

func newSyncMetrics(reg prometheus.Registerer) (*syncMetrics, error) {
	m := &syncMetrics{
		podStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_start_duration_seconds",
			Help:    "[ALPHA] Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run",
			Buckets: podStartupDurationBuckets,
		}),
		workerStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_worker_start_duration_seconds",
			Help:    "[ALPHA] Duration in seconds from kubelet seeing a pod to starting a worker.",
			Buckets: prometheus.DefBuckets,
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.podStart, m.workerStart} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("kubelet: register metrics: %w", err)
		}
	}
	return m, nil
}

// firstSeen is the config.seen annotation's time; zero when absent or bad.
func firstSeen(pod *v1.Pod) time.Time {
	t, err := time.Parse(time.RFC3339Nano, pod.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey])
	if err != nil {
		return time.Time{}
	}
	return t
}

// observePodStart records kubelet_pod_start_duration_seconds where upstream's
// SyncPod does: when the status store had no status for the pod yet, or when
// the pod moves from Pending to Running. Both measure from config.seen.
func (m *syncMetrics) observePodStart(seen time.Time, existing v1.PodStatus, known bool, phase v1.PodPhase) {
	if seen.IsZero() {
		return
	}
	if !known || existing.Phase == v1.PodPending && phase == v1.PodRunning {
		m.podStart.Observe(time.Since(seen).Seconds())
	}
}
