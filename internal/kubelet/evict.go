package kubelet

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
)

// minKillTimeout is the shortest wait for a pod killed now (upstream's
// killPodNow waits 1.5 times the grace period, at least 10s).
const minKillTimeout = 10 * time.Second

// errKillTimeout is returned when the runtime did not stop the pod in time.
var errKillTimeout = errors.New("timeout waiting to kill pod")

// KillPodNow is the eviction manager's kill, as upstream's killPodNow: the
// pod's API status is updated by statusFn first (Failed, Evicted, the
// DisruptionTarget condition), then the pod worker stops it with the grace
// period and its content is marked removable. It waits until the containers
// are stopped, at most 1.5 times the grace period (10s at least); on timeout
// an ExceededGracePeriod event is recorded.
func (k *Kubelet) KillPodNow(ctx context.Context, pod *v1.Pod, gracePeriod int64, statusFn func(*v1.PodStatus)) error {
	st, ok := k.status.GetPodStatus(pod.UID)
	if !ok {
		st = *pod.Status.DeepCopy()
	}
	statusFn(&st)
	k.status.SetPodStatus(pod, st)
	done := make(chan struct{})
	k.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: pod,
		KillPodOptions: &podworkers.KillPodOptions{PodTerminationGracePeriodSecondsOverride: &gracePeriod, Evict: true, CompletedCh: done}})
	timeout := max(time.Duration(gracePeriod+gracePeriod/2)*time.Second, minKillTimeout)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		k.recorder.Eventf(pod, v1.EventTypeWarning, "ExceededGracePeriod", "Container runtime did not kill the pod within specified grace period.")
		return errKillTimeout
	}
}

// DeleteAllUnusedContainers removes every dead container the GC policy
// allows, and all those of terminated pods (the eviction manager's disk
// reclaim, upstream's DeleteAllUnusedContainers).
func (k *Kubelet) DeleteAllUnusedContainers(ctx context.Context) error {
	k.logger.Info("Attempting to delete unused containers")
	return k.deps.runtime.GarbageCollect(ctx, k.cfg.gcPolicy, k.deps.sources.SeenAllSources(), true, k.workers)
}
