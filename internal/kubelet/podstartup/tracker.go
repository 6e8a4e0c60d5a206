// Package podstartup measures pod start latency as upstream's pod startup
// SLI defines it: from the pod's creation timestamp to the moment the kubelet
// sees, on its watch of the API server, the pod with every container
// started, less the time spent pulling images and running init containers.
// It serves kubelet_pod_start_sli_duration_seconds,
// kubelet_pod_start_total_duration_seconds and
// kubelet_first_network_pod_start_sli_duration_seconds.
//
// The moments come from four places, each through a small interface declared
// where it is used: the API pod source (every pod of every update seen on the
// watch), the runtime manager (image pulls, init containers started and
// finished) and the status syncer (a status patch the API server accepted).
package podstartup

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// buckets are upstream's pod start buckets (pkg/kubelet/metrics).
var buckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// Tracker follows API pods from their first sighting until their start is
// recorded. It is safe for concurrent use; a nil *Tracker records nothing.
type Tracker struct {
	clock  clock.Clock
	logger *zap.Logger

	sli, total   *prometheus.HistogramVec
	firstNetwork prometheus.Gauge

	mu                  sync.Mutex
	pods                map[k8stypes.UID]*podState
	excluded            map[k8stypes.UID]bool // unschedulable once: never tracked again
	firstNetworkPodSeen bool
}

// podState is what one pod's start has cost so far.
type podState struct {
	pullStarts  []time.Time // pulls begun and not finished, oldest first
	pulls       []pullSession
	initRuntime time.Duration
	initStart   time.Time // of the init container running now; zero: none
	runningAt   time.Time // first status patch with every container started
	recorded    bool
}

type pullSession struct{ start, end time.Time }

// Options configures a Tracker.
type Options struct {
	// Registerer receives the three series; nil registers nothing.
	Registerer prometheus.Registerer
	// Clock; nil: the real clock.
	Clock clock.Clock
	// Logger; nil: no logging.
	Logger *zap.Logger
}

// New builds a Tracker and registers its series.
func New(opts Options) (*Tracker, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	t := &Tracker{
		clock:  opts.Clock,
		logger: opts.Logger,
		sli: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_start_sli_duration_seconds",
			Help:    "[ALPHA] Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			Buckets: buckets,
		}, []string{}),
		total: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pod_start_total_duration_seconds",
			Help:    "[ALPHA] Duration in seconds to start a pod since creation, including time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
			Buckets: buckets,
		}, []string{}),
		firstNetwork: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "first_network_pod_start_sli_duration_seconds",
			Help: "[INTERNAL] Duration in seconds to start the first network pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
		}),
		pods:     map[k8stypes.UID]*podState{},
		excluded: map[k8stypes.UID]bool{},
	}
	if opts.Registerer != nil {
		for _, c := range []prometheus.Collector{t.sli, t.total, t.firstNetwork} {
			if err := opts.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("podstartup: register metrics: %w", err)
			}
		}
	}
	return t, nil
}

// ObservedPodsOnWatch takes one update of the API source: every pod bound to
// this node as the watch delivered it at when. A pod first seen before it
// started is tracked; a tracked pod seen with every container started after
// its status said so has its start recorded, once. Pods no longer in the
// update are forgotten.
func (t *Tracker) ObservedPodsOnWatch(pods []*v1.Pod, when time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	present := make(map[k8stypes.UID]struct{}, len(pods))
	for _, pod := range pods {
		present[pod.UID] = struct{}{}
		t.observe(pod, when)
	}
	for uid := range t.pods {
		if _, ok := present[uid]; !ok {
			delete(t.pods, uid)
		}
	}
	for uid := range t.excluded {
		if _, ok := present[uid]; !ok {
			delete(t.excluded, uid)
		}
	}
}

// observe is upstream's ObservedPodOnWatch for one pod. Caller holds mu.
func (t *Tracker) observe(pod *v1.Pod, when time.Time) {
	if pod.Status.Phase == v1.PodFailed || pod.Status.Phase == v1.PodSucceeded {
		delete(t.pods, pod.UID)
		return
	}
	st := t.pods[pod.UID]
	if st == nil {
		// Only a pod seen before it started is measured, and never one
		// that was unschedulable (the SLI counts pods schedulable at once).
		if t.excluded[pod.UID] || pod.Status.StartTime != nil && !pod.Status.StartTime.IsZero() {
			return
		}
		if unschedulable(pod) {
			t.excluded[pod.UID] = true
			return
		}
		t.pods[pod.UID] = &podState{}
		return
	}
	if unschedulable(pod) {
		delete(t.pods, pod.UID)
		t.excluded[pod.UID] = true
		return
	}
	if st.runningAt.IsZero() || st.recorded || !allStarted(pod) {
		return
	}
	total := when.Sub(pod.CreationTimestamp.Time)
	pulling := pullingTime(st.pulls)
	sli := total - pulling - st.initRuntime
	stateful := isStateful(pod)
	t.logger.Info("Observed pod startup duration", zap.String("pod", pod.Namespace+"/"+pod.Name),
		zap.Float64("podStartSLOduration", sli.Seconds()), zap.Duration("podStartE2EDuration", total),
		zap.Duration("totalImagesPullingTime", pulling), zap.Duration("totalInitContainerRuntime", st.initRuntime),
		zap.Bool("isStatefulPod", stateful), zap.Time("podCreationTimestamp", pod.CreationTimestamp.Time),
		zap.Time("observedRunningTime", st.runningAt), zap.Time("watchObservedRunningTime", when))
	t.total.WithLabelValues().Observe(total.Seconds())
	if !stateful {
		t.sli.WithLabelValues().Observe(sli.Seconds())
		if !pod.Spec.HostNetwork && !t.firstNetworkPodSeen {
			t.firstNetwork.Set(sli.Seconds())
			t.firstNetworkPodSeen = true
		}
	}
	st.recorded = true
}

// RecordImageStartedPulling: a pull for the pod begins now.
func (t *Tracker) RecordImageStartedPulling(uid k8stypes.UID) {
	t.withState(uid, func(st *podState) { st.pullStarts = append(st.pullStarts, t.clock.Now()) })
}

// RecordImageFinishedPulling: the oldest pull of the pod still running ended
// now (also called when the image turned out to be present, which ends a pull
// another pod's container started).
func (t *Tracker) RecordImageFinishedPulling(uid k8stypes.UID) {
	t.withState(uid, func(st *podState) {
		if len(st.pullStarts) == 0 {
			return
		}
		st.pulls = append(st.pulls, pullSession{start: st.pullStarts[0], end: t.clock.Now()})
		st.pullStarts = st.pullStarts[1:]
	})
}

// RecordInitContainerStarted: an init container (not a sidecar) started at.
func (t *Tracker) RecordInitContainerStarted(uid k8stypes.UID, at time.Time) {
	t.withState(uid, func(st *podState) { st.initStart = at })
}

// RecordInitContainerFinished: the running init container exited at.
func (t *Tracker) RecordInitContainerFinished(uid k8stypes.UID, at time.Time) {
	t.withState(uid, func(st *podState) {
		if st.initStart.IsZero() {
			return
		}
		if d := at.Sub(st.initStart); d > 0 {
			st.initRuntime += d
		}
		st.initStart = time.Time{}
	})
}

// RecordStatusUpdated takes the pod as the API server returned it after a
// status patch that changed it: the first one with every container started
// marks the pod running.
func (t *Tracker) RecordStatusUpdated(pod *v1.Pod) {
	t.withState(pod.UID, func(st *podState) {
		if st.recorded || !st.runningAt.IsZero() || !allStarted(pod) {
			return
		}
		st.runningAt = t.clock.Now()
	})
}

// withState runs f on the pod's state under the lock, if the pod is tracked.
func (t *Tracker) withState(uid k8stypes.UID, f func(*podState)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if st := t.pods[uid]; st != nil {
		f(st)
	}
}

// pullingTime is the time covered by the pull sessions, overlaps counted
// once (sessions in the order they ended).
func pullingTime(sessions []pullSession) time.Duration {
	var total time.Duration
	var end time.Time
	for i, s := range sessions {
		switch {
		case i == 0 || s.start.After(end):
			total += s.end.Sub(s.start)
			end = s.end
		case s.end.After(end):
			total += s.end.Sub(end)
			end = s.end
		}
	}
	return total
}

// allStarted: every container of the pod's status runs and has a start time
// (upstream's hasPodStartedSLO; a pod without container statuses counts).
func allStarted(pod *v1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil || cs.State.Running.StartedAt.IsZero() {
			return false
		}
	}
	return true
}

// isStateful: the pod mounts a volume other than a secret, config map,
// downward API, emptyDir or projected one (the SLI leaves those pods out).
func isStateful(pod *v1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Secret == nil && v.ConfigMap == nil && v.DownwardAPI == nil && v.EmptyDir == nil && v.Projected == nil {
			return true
		}
	}
	return false
}

// unschedulable: the pod's PodScheduled condition is False.
func unschedulable(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodScheduled && c.Status == v1.ConditionFalse {
			return true
		}
	}
	return false
}
