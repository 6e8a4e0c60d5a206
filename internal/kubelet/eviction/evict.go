package eviction

import (
	"context"
	"fmt"
	"slices"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// The eviction_signal labels of local storage evictions (upstream's).
const (
	signalEmptyDirFsLimit           = "emptydirfs.limit"
	signalEphemeralPodFsLimit       = "ephemeralpodfs.limit"
	signalEphemeralContainerFsLimit = "ephemeralcontainerfs.limit"
)

// reclaim acts on the met thresholds: the first one (memory first) is
// reclaimed at node level when it can be (disk: dead containers, then unused
// images), else the pods are ranked and the first one that may be evicted is.
func (m *Manager) reclaim(ctx context.Context, deps Deps, met []Threshold, obs observations, active []*v1.Pod, stats podStatsFunc) []*v1.Pod {
	slices.SortStableFunc(met, byEvictionPriority)
	t := met[0]
	res := signalResource[t.Signal]
	m.log.Warn("Eviction manager: attempting to reclaim", zap.String("resourceName", string(res)), zap.String("signal", t.Signal))
	m.nodeEvent(v1.EventTypeWarning, "EvictionThresholdMet", fmt.Sprintf("Attempting to reclaim %s", res))
	if m.reclaimNodeLevel(ctx, deps, t.Signal, res) {
		return nil
	}
	if len(active) == 0 {
		m.log.Error("Eviction manager: eviction thresholds have been met, but no pods are active to evict")
		return nil
	}
	pods := append([]*v1.Pod{}, active...)
	m.rank[t.Signal](pods, stats)
	now := m.clock.Now()
	for _, th := range met {
		if o, ok := obs[th.Signal]; ok && !o.time.IsZero() {
			m.metrics.statsAge.WithLabelValues(th.Signal).Observe(now.Sub(o.time).Seconds())
		}
	}
	for _, pod := range pods {
		grace := immediateGracePeriod
		if !t.hard() {
			grace = m.opts.MaxPodGracePeriodSeconds
			if pod.Spec.TerminationGracePeriodSeconds != nil {
				grace = min(grace, *pod.Spec.TerminationGracePeriodSeconds)
			}
		}
		msg, annotations := evictionMessage(res, pod, stats, met, obs)
		cond := &v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: v1.PodReasonTerminationByKubelet, Message: msg}
		if m.evictPod(ctx, deps, pod, grace, msg, annotations, cond) {
			m.metrics.evictions.WithLabelValues(t.Signal).Inc()
			return []*v1.Pod{pod}
		}
	}
	m.log.Error("Eviction manager: unable to evict any pods from the node")
	return nil
}

// reclaimNodeLevel runs the node-level reclaim of signal; it reports true
// when a fresh sample then meets no threshold (with their minimum reclaim),
// so that no pod needs to go.
func (m *Manager) reclaimNodeLevel(ctx context.Context, deps Deps, signal string, res v1.ResourceName) bool {
	funcs := m.nodeReclaimFuncs(deps, signal)
	if len(funcs) == 0 {
		return false
	}
	for _, f := range funcs {
		if err := f(ctx); err != nil {
			m.log.Warn("Eviction manager: unexpected error when attempting to reduce resource pressure", zap.String("resourceName", string(res)), zap.Error(err))
		}
	}
	node, err := deps.Stats.NodeStats(ctx)
	if err != nil {
		m.log.Error("Eviction manager: failed to get summary stats after resource reclaim", zap.Error(err))
		return false
	}
	if len(thresholdsMet(m.opts.Thresholds, makeObservations(node, m.opts.HugePagesBytes), true)) == 0 {
		m.log.Info("Eviction manager: able to reduce resource pressure without evicting pods.", zap.String("resourceName", string(res)))
		return true
	}
	return false
}

// nodeReclaimFuncs are the node-level reclaim steps of a signal (upstream's
// buildSignalToNodeReclaimFuncs without the split containerfs): none for
// memory and pids; for disk signals dead containers then unused images, on
// the image filesystem only when it is dedicated.
func (m *Manager) nodeReclaimFuncs(deps Deps, signal string) []func(context.Context) error {
	if signalResource[signal] == v1.ResourceMemory || signalResource[signal] == resourcePIDs {
		return nil
	}
	if *m.dedicatedImageFs && (signal == resources.SignalNodeFsAvailable || signal == resources.SignalNodeFsInodesFree) {
		return nil
	}
	var out []func(context.Context) error
	for _, f := range []func(context.Context) error{deps.DeleteAllUnusedContainers, deps.DeleteUnusedImages} {
		if f != nil {
			out = append(out, f)
		}
	}
	return out
}

// evictPod evicts one pod unless it is critical: an Evicted event, the pod
// killed with the grace period after its status became Failed / Evicted
// with msg (and cond). It reports whether the pod was (tried to be) evicted.
func (m *Manager) evictPod(ctx context.Context, deps Deps, pod *v1.Pod, grace int64, msg string, annotations map[string]string, cond *v1.PodCondition) bool {
	if kubecontainer.IsCriticalPod(pod) {
		m.log.Error("Eviction manager: cannot evict a critical pod", zap.String("pod", pod.Namespace+"/"+pod.Name))
		return false
	}
	if m.opts.Recorder != nil {
		m.opts.Recorder.AnnotatedEventf(pod, annotations, v1.EventTypeWarning, Reason, "%s", msg)
	}
	m.log.Info("Evicting pod", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("podUID", string(pod.UID)), zap.String("message", msg))
	err := deps.KillPod(ctx, pod, grace, func(st *v1.PodStatus) {
		st.Phase, st.Reason, st.Message = v1.PodFailed, Reason, msg
		if cond != nil {
			c := *cond
			c.ObservedGeneration = pod.Generation
			c.LastTransitionTime = metav1.NewTime(m.clock.Now())
			setCondition(st, c)
		}
	})
	if err != nil {
		m.log.Error("Eviction manager: pod failed to evict", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Error(err))
	} else {
		m.log.Info("Eviction manager: pod is evicted successfully", zap.String("pod", pod.Namespace+"/"+pod.Name))
	}
	return true
}

// setCondition replaces the status's condition of c's type, or appends c;
// the transition time is kept when the status does not change.
func setCondition(st *v1.PodStatus, c v1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type == c.Type {
			if st.Conditions[i].Status == c.Status {
				c.LastTransitionTime = st.Conditions[i].LastTransitionTime
			}
			st.Conditions[i] = c
			return
		}
	}
	st.Conditions = append(st.Conditions, c)
}

func (m *Manager) nodeEvent(eventType, reason, message string) {
	kubecontainer.NodeEvents(m.opts.Recorder, m.opts.NodeRef)(eventType, reason, message)
}
