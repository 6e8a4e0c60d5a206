package podworkers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/kubelet-dockershim/kubelet/internal/faultinject"
)

// podWork is one unit of work taken from the pending update.
type podWork struct {
	state       PodWorkerState
	updateType  UpdateType
	startTime   time.Time // when the update was made
	pod         *v1.Pod   // the spec, or a placeholder for a runtime-only pod
	runtimeOnly bool      // an orphan: only the terminating step runs
	gracePeriod *int64    // for TerminatingPod
}

// startResult is what the worker does after startSync.
type startResult int

const (
	startNothing startResult = iota // no pending update
	startRun                        // run the work
	startWait                       // not allowed to start yet; wait for a wake-up
	startExit                       // the worker is done
)

// workerLoop processes the updates of one pod until the pod is finished, its
// worker is forgotten, or the workers stop.
func (p *PodWorkers) workerLoop(uid k8stypes.UID, wake <-chan struct{}) {
	defer p.wg.Done()
	var (
		lastSync time.Time
		timer    clock.Timer
		timerC   <-chan time.Time
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		select {
		case <-p.ctx.Done():
			return
		case _, ok := <-wake:
			if !ok {
				return
			}
		case <-timerC:
			timerC = nil
			p.requeueResync(uid)
		}
		if p.ctx.Err() != nil {
			return
		}

		faultinject.Point("podworkers.sync")
		ctx, work, res := p.startSync(uid)
		switch res {
		case startExit:
			return
		case startNothing, startWait:
			continue
		}
		delay, done := p.runWork(ctx, uid, work, &lastSync)
		if done {
			return
		}
		if delay < 0 {
			timerC = nil
			continue
		}
		if timer == nil {
			timer = p.clock.NewTimer(delay)
		} else {
			timer.Stop()
			timer.Reset(delay)
		}
		timerC = timer.C()
	}
}

// runWork runs one work item and records its outcome. It returns the delay
// before the next resync (negative: none, the next work is queued already) and
// whether the worker is done.
func (p *PodWorkers) runWork(ctx context.Context, uid k8stypes.UID, w podWork, lastSync *time.Time) (time.Duration, bool) {
	log := p.logger.With(zap.String("pod", w.pod.Namespace+"/"+w.pod.Name), zap.String("podUID", string(uid)),
		zap.Stringer("workType", w.state), zap.Stringer("updateType", w.updateType))
	isTerminal, err := p.doSync(ctx, uid, w, lastSync)
	op := w.updateType.String()
	defer func() { p.duration.WithLabelValues(op).Observe(p.clock.Since(w.startTime).Seconds()) }()

	transition := false
	switch {
	case err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled):
		log.Debug("sync interrupted", zap.Error(err))
	case err != nil:
		log.Error("error syncing pod, will retry", zap.Error(err), zap.Duration("backOff", p.backOffPeriod))
	case w.state == TerminatedPod:
		op = workTerminated
		log.Debug("pod finished")
		p.completeTerminated(uid)
		return 0, true
	case w.state == TerminatingPod && w.runtimeOnly:
		log.Debug("orphaned pod terminated")
		p.completeTerminatingRuntimePod(uid)
		return 0, true
	case w.state == TerminatingPod:
		log.Debug("pod terminated")
		p.completeTerminating(uid)
		transition = true
	case isTerminal:
		log.Debug("pod reached a terminal phase")
		p.completeSync(uid)
		transition = true
	}
	p.completeWork(uid)
	switch {
	case transition:
		return -1, false
	case err != nil:
		return p.backOffPeriod, false
	}
	return p.resyncInterval, false
}

// doSync waits for a fresh status and calls the sync step of the work's state.
func (p *PodWorkers) doSync(ctx context.Context, uid k8stypes.UID, w podWork, lastSync *time.Time) (bool, error) {
	status, err := p.cache.GetNewerThan(ctx, uid, *lastSync)
	if err != nil {
		return false, fmt.Errorf("determine status of pod %s/%s: %w", w.pod.Namespace, w.pod.Name, err)
	}
	if err := ctx.Err(); err != nil {
		return false, err // interrupted while waiting: the new update is pending
	}
	defer func() { *lastSync = p.clock.Now() }()
	switch w.state {
	case TerminatedPod:
		return false, p.sync.SyncTerminatedPod(ctx, w.pod, status)
	case TerminatingPod:
		p.acknowledgeTerminating(uid)
		return false, p.sync.SyncTerminatingPod(ctx, w.pod, status, w.gracePeriod)
	}
	return p.sync.SyncPod(ctx, w.updateType, w.pod, status)
}

// startSync takes the pending update, decides whether the pod may run, and
// gives the work a context that UpdatePod can cancel.
func (p *PodWorkers) startSync(uid k8stypes.UID) (context.Context, podWork, startResult) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[uid]
	if !ok || st.finished {
		return nil, podWork{}, startExit
	}
	if st.pending == nil {
		st.working = false
		return nil, podWork{}, startNothing
	}
	u := *st.pending
	st.pending = nil
	w := podWork{state: st.workType(), updateType: u.UpdateType, startTime: u.StartTime, pod: u.Pod, runtimeOnly: u.Pod == nil}
	if w.runtimeOnly {
		w.pod = placeholderPod(u.RunningPod)
	}
	if w.state == TerminatingPod {
		gp := st.gracePeriod
		w.gracePeriod = &gp
	}

	if !st.started() && !(w.runtimeOnly && w.state == TerminatingPod) {
		canStart, canEverStart := p.allowPodStart(uid, st, w)
		switch {
		case !canEverStart:
			p.logger.Debug("pod terminated before it could start", zap.String("podUID", string(uid)))
			p.duration.WithLabelValues(workTerminated).Observe(p.clock.Since(u.StartTime).Seconds())
			st.terminatedAt = p.clock.Now()
			st.finish()
			p.releaseStatic(st.fullname, uid)
			return nil, podWork{}, startExit
		case !canStart:
			st.pending = &u
			st.working = false
			return nil, podWork{}, startWait
		}
		st.startedAt = p.clock.Now()
	}
	st.mergeActive(u)
	if st.ctx == nil || st.ctx.Err() != nil {
		st.ctx, st.cancel = context.WithCancel(p.ctx)
	}
	return st.ctx, w, startRun
}

// requeueResync queues the last update again for a periodic resync, unless an
// update is pending already.
func (p *PodWorkers) requeueResync(uid k8stypes.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[uid]
	if !ok || st.pending != nil || st.active == nil || st.finished {
		return
	}
	u := *st.active
	u.UpdateType = SyncPodSync
	u.StartTime = p.clock.Now()
	st.pending = &u
	st.working = true
}

// requeueLast queues the last update again (after a state change) unless an
// update is pending already, and wakes the worker. Caller holds mu.
func (p *PodWorkers) requeueLast(st *podState) {
	if st.pending != nil || st.active == nil {
		st.notify()
		return
	}
	u := *st.active
	u.StartTime = p.clock.Now()
	st.pending = &u
	st.working = true
	st.notify()
}

// completeWork wakes the worker again if an update is pending, else marks it idle.
func (p *PodWorkers) completeWork(uid k8stypes.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[uid]
	if !ok {
		return
	}
	if st.pending != nil {
		st.notify()
		return
	}
	st.working = false
}

// acknowledgeTerminating records that the worker saw the termination: no
// container of the pod starts any more.
func (p *PodWorkers) acknowledgeTerminating(uid k8stypes.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.pods[uid]; ok && st.terminationRequested() {
		st.startedTerminating = true
	}
}

// completeSync: SyncPod reported the pod terminal; terminate it now.
func (p *PodWorkers) completeSync(uid k8stypes.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[uid]
	if !ok {
		return
	}
	if !st.terminationRequested() {
		st.terminatingAt = p.clock.Now()
		var pod *v1.Pod
		if st.active != nil {
			pod = st.active.Pod
		}
		st.gracePeriod, _ = effectiveGracePeriod(st.gracePeriod, pod, nil)
	}
	st.startedTerminating = true
	p.requeueLast(st)
}

// completeTerminating: the containers are stopped; every waiting kill is told,
// and the terminated step is queued.
func (p *PodWorkers) completeTerminating(uid k8stypes.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[uid]
	if !ok {
		return
	}
	st.terminatedAt = p.clock.Now()
	st.closeCompletions()
	p.requeueLast(st)
}

// completeTerminatingRuntimePod: an orphan's containers are stopped; it has no
// config, so it is forgotten right away.
func (p *PodWorkers) completeTerminatingRuntimePod(uid k8stypes.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[uid]
	if !ok {
		return
	}
	st.terminatedAt = p.clock.Now()
	st.finish()
	p.releaseStatic(st.fullname, uid)
	delete(p.pods, uid)
}

// completeTerminated: the pod is finished; the worker exits and the UID stays
// known (and ignored) until SyncKnownPods forgets it.
func (p *PodWorkers) completeTerminated(uid k8stypes.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[uid]
	if !ok {
		return
	}
	st.finish()
	p.releaseStatic(st.fullname, uid)
}
