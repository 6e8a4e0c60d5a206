package podworkers

import (
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// SyncKnownPods reconciles the workers with the pods the kubelet wants
// (desired). A finished worker whose pod is no longer desired, or for whose UID
// a create arrived while it was terminating, is forgotten (and left out of the
// result: the caller sends a new create if it still wants the pod). A started
// worker whose pod is no longer desired is made to terminate. It returns the
// state of every remaining worker. After the first call, unknown pods count as
// not running (see the Should* methods).
func (p *PodWorkers) SyncKnownPods(desired []*v1.Pod) map[k8stypes.UID]PodWorkerSync {
	want := make(map[k8stypes.UID]bool, len(desired))
	for _, pod := range desired {
		want[pod.UID] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.podsSynced = true
	out := map[k8stypes.UID]PodWorkerSync{}
	for uid, st := range p.pods {
		orphan := !want[uid]
		if (orphan || st.restartRequested) && p.removeTerminatedWorker(uid, st, orphan) {
			continue
		}
		s := PodWorkerSync{State: st.workType(), Orphan: orphan}
		for _, u := range []*UpdatePodOptions{st.active, st.pending} {
			if u != nil {
				if u.Pod != nil {
					s.HasConfig = true
					s.Static = kubecontainer.IsStaticPod(u.Pod)
				}
				break
			}
		}
		out[uid] = s
	}
	return out
}

// removeTerminatedWorker forgets a finished worker and reports true. An
// orphaned worker that is not finished is driven towards termination instead
// (or, never started, dropped at once). Caller holds mu.
func (p *PodWorkers) removeTerminatedWorker(uid k8stypes.UID, st *podState, orphan bool) bool {
	if !st.finished {
		if !orphan {
			return false
		}
		st.deleted = true
		switch {
		case !st.started() && !st.observedRuntime:
			// Nothing ran: drop it without syncing.
			p.logger.Debug("orphaned pod never started, forgotten", zap.String("podUID", string(uid)))
			st.finish()
		case !st.terminationRequested():
			p.logger.Debug("orphaned pod still running, terminating it", zap.String("podUID", string(uid)))
			st.terminatingAt = p.clock.Now()
			var pod *v1.Pod
			if st.active != nil {
				pod = st.active.Pod
			}
			st.gracePeriod, _ = effectiveGracePeriod(st.gracePeriod, pod, nil)
			p.requeueLast(st)
			if st.cancel != nil {
				st.cancel()
			}
			return false
		default:
			p.requeueLast(st)
			return false
		}
	}
	delete(p.pods, uid)
	p.releaseStatic(st.fullname, uid)
	return true
}

// allowPodStart decides whether a pod that has not started may start now
// (canStart) or ever (canEverStart). Only static pods wait: one pod per full
// name runs at a time, in arrival order. Caller holds mu.
func (p *PodWorkers) allowPodStart(uid k8stypes.UID, st *podState, w podWork) (canStart, canEverStart bool) {
	if !kubecontainer.IsStaticPod(w.pod) {
		return true, true
	}
	if st.terminationRequested() {
		return false, false
	}
	if !p.allowStaticPodStart(st.fullname, uid) {
		return false, true
	}
	return true, true
}

// allowStaticPodStart reports whether uid is the static pod allowed to run
// under fullname, claiming the name if it is free and uid is next in line.
// Caller holds mu.
func (p *PodWorkers) allowStaticPodStart(fullname string, uid k8stypes.UID) bool {
	if owner, ok := p.startedStatic[fullname]; ok {
		return owner == uid
	}
	waiting := p.waitingStatic[fullname]
	for len(waiting) > 0 {
		next := waiting[0]
		if st, ok := p.pods[next]; !ok || st.terminationRequested() || st.finished {
			waiting = waiting[1:] // gone or terminating: it will never start
			continue
		}
		if next != uid {
			p.waitingStatic[fullname] = waiting
			return false
		}
		waiting = waiting[1:]
		break
	}
	if len(waiting) == 0 {
		delete(p.waitingStatic, fullname)
	} else {
		p.waitingStatic[fullname] = waiting
	}
	p.startedStatic[fullname] = uid
	return true
}

// releaseStatic frees the full name held by uid and wakes the static pods
// waiting for it. Caller holds mu.
func (p *PodWorkers) releaseStatic(fullname string, uid k8stypes.UID) {
	if p.startedStatic[fullname] == uid {
		delete(p.startedStatic, fullname)
	}
	for _, w := range p.waitingStatic[fullname] {
		if st, ok := p.pods[w]; ok && st.pending != nil {
			st.working = true
			st.notify()
		}
	}
}

// effectiveGracePeriod returns the grace period (seconds) for a terminating pod:
// the smallest of the current one (0: none yet), the pod's deletion grace
// period and override, else the pod's terminationGracePeriodSeconds; at least
// 1. shortened reports that an existing grace period got shorter.
func effectiveGracePeriod(current int64, pod *v1.Pod, override *int64) (gracePeriod int64, shortened bool) {
	gp, set := current, current > 0
	lower := func(v *int64) {
		if v != nil && (!set || *v < gp) {
			gp, set = *v, true
		}
	}
	if pod != nil {
		lower(pod.DeletionGracePeriodSeconds)
	}
	lower(override)
	if !set && pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		gp = *pod.Spec.TerminationGracePeriodSeconds
	}
	if gp < 1 {
		gp = 1
	}
	return gp, current > 0 && gp != current
}
