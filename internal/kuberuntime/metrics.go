package kuberuntime

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
)

// imagePullDurationBuckets are upstream's buckets of
// kubelet_image_pull_duration_seconds.
var imagePullDurationBuckets = []float64{1, 5, 10, 20, 30, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// syncMetrics are upstream's series of the runtime manager's SyncPod and
// image pulls (pkg/kubelet/metrics), names, help texts and labels as upstream.
type syncMetrics struct {
	startedPods           prometheus.Counter
	startedPodsErrors     prometheus.Counter
	startedContainers     *prometheus.CounterVec
	startedContainersErrs *prometheus.CounterVec
	imagePullDuration     *prometheus.HistogramVec
	ensureImageRequests   *prometheus.CounterVec
}

func newSyncMetrics(reg prometheus.Registerer) (*syncMetrics, error) {
	m := &syncMetrics{
		startedPods: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "started_pods_total", Help: "[ALPHA] Cumulative number of pods started",
		}),
		startedPodsErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "started_pods_errors_total", Help: "[ALPHA] Cumulative number of errors when starting pods",
		}),
		startedContainers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "started_containers_total", Help: "[ALPHA] Cumulative number of containers started",
		}, []string{"container_type"}),
		startedContainersErrs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "started_containers_errors_total", Help: "[ALPHA] Cumulative number of errors when starting containers",
		}, []string{"container_type", "code"}),
		imagePullDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "image_pull_duration_seconds", Help: "[ALPHA] Duration in seconds to pull an image.",
			Buckets: imagePullDurationBuckets,
		}, []string{"image_size_in_bytes"}),
		ensureImageRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "image_manager_ensure_image_requests_total", Help: "[ALPHA] Number of ensure-image requests processed by the kubelet.",
		}, []string{"pull_policy", "present_locally", "pull_required"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.startedPods, m.startedPodsErrors, m.startedContainers, m.startedContainersErrs, m.imagePullDuration, m.ensureImageRequests} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("kuberuntime: register metrics: %w", err)
		}
	}
	return m, nil
}

// ensureImageRequest counts one ensure-image request as upstream: the pull
// policy lower-cased, whether the image was present and whether a pull was
// required ("unknown" when the request ended before it was known).
func (m *syncMetrics) ensureImageRequest(policy v1.PullPolicy, present, pullRequired *bool) {
	label := func(b *bool) string {
		if b == nil {
			return "unknown"
		}
		return strconv.FormatBool(*b)
	}
	m.ensureImageRequests.WithLabelValues(strings.ToLower(string(policy)), label(present), label(pullRequired)).Inc()
}

// containerType is the container_type label: container, init_container
// (sidecars included) or ephemeral_container.
func containerType(pod *v1.Pod, c *v1.Container) string {
	for i := range pod.Spec.InitContainers {
		if &pod.Spec.InitContainers[i] == c {
			return "init_container"
		}
	}
	if ephemeralContainerOf(pod, c) != nil {
		return "ephemeral_container"
	}
	return "container"
}

// imageSizeBucket is upstream's image_size_in_bytes label: "N/A" for an
// unknown size, else the range the size falls in (lower bounds exclusive,
// binary units).
func imageSizeBucket(size uint64) string {
	const mib, gib = 1 << 20, 1 << 30
	if size == 0 {
		return "N/A"
	}
	for _, b := range []struct {
		above uint64
		label string
	}{
		{100 * gib, "GT100GB"}, {60 * gib, "60GB-100GB"}, {40 * gib, "40GB-60GB"}, {30 * gib, "30GB-40GB"},
		{20 * gib, "20GB-30GB"}, {10 * gib, "10GB-20GB"}, {5 * gib, "5GB-10GB"}, {gib, "1GB-5GB"},
		{500 * mib, "500MB-1GB"}, {100 * mib, "100MB-500MB"}, {10 * mib, "10MB-100MB"},
	} {
		if size > b.above {
			return b.label
		}
	}
	return "0-10MB"
}
