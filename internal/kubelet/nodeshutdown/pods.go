package nodeshutdown

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Upstream's priorities of the two groups made from shutdownGracePeriod and
// shutdownGracePeriodCriticalPods: the default priority of a pod without a
// priority class, and system-cluster-critical's.
const (
	defaultPriority        int32 = 0
	systemCriticalPriority int32 = 2000000000
)

// The status a pod stopped for the shutdown ends with (upstream's).
const (
	shutdownReason  = "Terminated"
	shutdownMessage = "Pod was terminated in response to imminent node shutdown."
)

// shutdownGroups returns the groups pods are stopped in, lowest priority
// first: byPriority when set, else a group for ordinary pods with
// shutdownGracePeriod - criticalPods and one for critical pods with
// criticalPods. Nil means graceful shutdown is disabled.
func shutdownGroups(grace, criticalPods time.Duration, byPriority []kubeletv1beta1.ShutdownGracePeriodByPodPriority) []kubeletv1beta1.ShutdownGracePeriodByPodPriority {
	if len(byPriority) > 0 {
		groups := slices.Clone(byPriority)
		slices.SortFunc(groups, func(a, b kubeletv1beta1.ShutdownGracePeriodByPodPriority) int {
			return cmp.Compare(a.Priority, b.Priority)
		})
		return groups
	}
	if grace == 0 || criticalPods > grace {
		return nil
	}
	return []kubeletv1beta1.ShutdownGracePeriodByPodPriority{
		{Priority: defaultPriority, ShutdownGracePeriodSeconds: int64((grace - criticalPods) / time.Second)},
		{Priority: systemCriticalPriority, ShutdownGracePeriodSeconds: int64(criticalPods / time.Second)},
	}
}

// totalGracePeriod is how long the whole shutdown may take: the sum of the
// groups' periods, which logind's InhibitDelayMaxSec has to cover.
func totalGracePeriod(groups []kubeletv1beta1.ShutdownGracePeriodByPodPriority) time.Duration {
	var sum int64
	for _, g := range groups {
		sum += g.ShutdownGracePeriodSeconds
	}
	return time.Duration(sum) * time.Second
}

// podGroup is one priority group and the pods that fall in it.
type podGroup struct {
	kubeletv1beta1.ShutdownGracePeriodByPodPriority
	pods []*v1.Pod
}

// groupPods puts each pod in the group of the highest priority not above the
// pod's (a pod without priority counts as 0); pods below every group go to
// the lowest one. groups must be sorted by priority.
func groupPods(groups []kubeletv1beta1.ShutdownGracePeriodByPodPriority, pods []*v1.Pod) []podGroup {
	out := make([]podGroup, len(groups))
	for i, g := range groups {
		out[i].ShutdownGracePeriodByPodPriority = g
	}
	if len(out) == 0 {
		return out
	}
	for _, pod := range pods {
		var prio int32
		if pod.Spec.Priority != nil {
			prio = *pod.Spec.Priority
		}
		idx := 0
		for i := len(out) - 1; i >= 0; i-- {
			if out[i].Priority <= prio {
				idx = i
				break
			}
		}
		out[idx].pods = append(out[idx].pods, pod)
	}
	return out
}

// podGracePeriod is the group's period, or the pod's own
// terminationGracePeriodSeconds when that is shorter.
func podGracePeriod(pod *v1.Pod, group int64) int64 {
	if t := pod.Spec.TerminationGracePeriodSeconds; t != nil && *t <= group {
		return *t
	}
	return group
}

// shutdownStatus returns the status update of a pod stopped for the
// shutdown: Failed (unless it already succeeded), reason Terminated and a
// DisruptionTarget condition.
func shutdownStatus(pod *v1.Pod, now func() time.Time) func(*v1.PodStatus) {
	return func(st *v1.PodStatus) {
		if st.Phase != v1.PodSucceeded {
			st.Phase = v1.PodFailed
		}
		st.Reason = shutdownReason
		st.Message = shutdownMessage
		setCondition(st, v1.PodCondition{
			Type:               v1.DisruptionTarget,
			ObservedGeneration: pod.Generation,
			Status:             v1.ConditionTrue,
			LastTransitionTime: metav1.NewTime(now()),
			Reason:             v1.PodReasonTerminationByKubelet,
			Message:            shutdownMessage,
		})
	}
}

// setCondition adds or replaces the condition of c's type, keeping the old
// transition time when the status does not change.
func setCondition(st *v1.PodStatus, c v1.PodCondition) {
	for i := range st.Conditions {
		if st.Conditions[i].Type != c.Type {
			continue
		}
		if st.Conditions[i].Status == c.Status {
			c.LastTransitionTime = st.Conditions[i].LastTransitionTime
		}
		st.Conditions[i] = c
		return
	}
	st.Conditions = append(st.Conditions, c)
}

// killPods stops the pods group by group, lowest priority first. Every pod
// of a group is stopped at once; the next group starts when they are all
// gone or the group's grace period has passed. Empty groups take no time.
func (m *Manager) killPods(ctx context.Context, pods []*v1.Pod) error {
	for _, group := range groupPods(m.groups, pods) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if len(group.pods) == 0 {
			continue
		}
		m.killGroup(ctx, group)
	}
	return nil
}

// killGroup stops the group's pods and waits for them, at most the group's
// grace period.
func (m *Manager) killGroup(ctx context.Context, group podGroup) {
	var wg sync.WaitGroup
	for _, pod := range group.pods {
		wg.Go(func() {
			defer logging.HandleCrash(m.log, "node shutdown kill")
			m.killPod(ctx, pod, group.ShutdownGracePeriodSeconds)
		})
	}
	done := make(chan struct{})
	go func() {
		defer logging.HandleCrash(m.log, "node shutdown kill")
		wg.Wait()
		close(done)
	}()
	timer := m.clock.NewTimer(time.Duration(group.ShutdownGracePeriodSeconds) * time.Second)
	defer timer.Stop()
	fields := []zap.Field{zap.Int64("gracePeriod", group.ShutdownGracePeriodSeconds), zap.Int32("priority", group.Priority)}
	select {
	case <-done:
		m.log.Debug("Done waiting for all pods in group to terminate", fields...)
	case <-timer.C():
		m.log.Debug("Shutdown manager pod killing time out", fields...)
	case <-ctx.Done():
	}
}

func (m *Manager) killPod(ctx context.Context, pod *v1.Pod, groupGrace int64) {
	grace := podGracePeriod(pod, groupGrace)
	name := zap.String("pod", pod.Namespace+"/"+pod.Name)
	m.log.Debug("Shutdown manager killing pod with gracePeriod", name, zap.Int64("gracePeriod", grace))
	if err := m.opts.KillPod(ctx, pod, grace, shutdownStatus(pod, m.clock.Now)); err != nil {
		m.log.Debug("Shutdown manager failed killing pod", name, zap.Error(err))
		return
	}
	m.log.Debug("Shutdown manager finished killing pod", name)
}
