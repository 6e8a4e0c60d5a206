package podworkers

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// PodWorkers runs one worker goroutine per pod UID; see the package doc for the
// state machine. All methods are safe for concurrent use.
type PodWorkers struct {
	duration       *prometheus.HistogramVec // kubelet_pod_worker_duration_seconds
	sync           SyncFuncs
	cache          StatusCache
	resyncInterval time.Duration
	backOffPeriod  time.Duration
	logger         *zap.Logger
	clock          clock.Clock

	ctx    context.Context // parent of every sync's context; cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // worker goroutines

	mu         sync.Mutex
	stopped    bool
	podsSynced bool // SyncKnownPods ran once: unknown pods are known not to run
	pods       map[k8stypes.UID]*podState
	// Static pods with the same full name (name_namespace) run one at a time,
	// in the order UpdatePod first saw them.
	startedStatic map[string]k8stypes.UID
	waitingStatic map[string][]k8stypes.UID
}

// podState is one pod's place in the state machine; guarded by PodWorkers.mu.
type podState struct {
	fullname string
	// wake (buffered, 1) tells the worker that pending is set; closed when the
	// worker must exit; nil once closed.
	wake chan struct{}
	// ctx/cancel belong to the sync in flight; UpdatePod cancels it to interrupt.
	ctx    context.Context
	cancel context.CancelFunc

	working bool
	// pending is the next update to work on (the newest wins); active is the
	// update last handed to a sync, the state other components see.
	pending, active *UpdatePodOptions

	syncedAt      time.Time // first seen
	startedAt     time.Time // allowed to start
	terminatingAt time.Time // termination requested
	terminatedAt  time.Time // SyncTerminatingPod succeeded
	gracePeriod   int64     // seconds, >= 1 once terminatingAt is set
	completions   []chan<- struct{}

	startedTerminating bool // the worker saw the termination: no container starts any more
	deleted            bool // deleted in config, or orphaned
	evicted            bool // killed by the eviction manager
	finished           bool // SyncTerminatedPod succeeded: the worker is gone
	restartRequested   bool // a create for this UID came while it was terminating
	observedRuntime    bool // a RunningPod for it was seen: it must be terminated
}

func (s *podState) terminationRequested() bool { return !s.terminatingAt.IsZero() }
func (s *podState) terminated() bool           { return !s.terminatedAt.IsZero() }
func (s *podState) started() bool              { return !s.startedAt.IsZero() }

// workType is what the next sync of the pod does.
func (s *podState) workType() PodWorkerState {
	switch {
	case s.terminated():
		return TerminatedPod
	case s.terminationRequested():
		return TerminatingPod
	}
	return SyncPod
}

// notify wakes the worker if it runs (never blocks).
func (s *podState) notify() {
	if s.wake == nil {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// closeCompletions closes the CompletedCh of every recorded kill.
func (s *podState) closeCompletions() {
	for _, ch := range s.completions {
		close(ch)
	}
	s.completions = nil
}

// finish marks the worker done: it exits, its context is released.
func (s *podState) finish() {
	s.finished = true
	s.working = false
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
	if s.cancel != nil {
		s.cancel()
	}
	s.closeCompletions()
}

// mergeActive records the update handed to a sync: the newest pod spec, but a
// RunningPod-only update does not replace a known spec.
func (s *podState) mergeActive(u UpdatePodOptions) {
	if s.active == nil {
		s.active = &UpdatePodOptions{}
	}
	if s.active.Pod == nil || u.RunningPod == nil {
		s.active.Pod = u.Pod
	}
	s.active.RunningPod = u.RunningPod
	s.active.UpdateType = u.UpdateType
	if u.KillPodOptions != nil {
		s.active.KillPodOptions = &KillPodOptions{PodTerminationGracePeriodSecondsOverride: u.KillPodOptions.PodTerminationGracePeriodSecondsOverride}
	}
}

// New wires the pod workers; goroutines start with the first UpdatePod of each
// pod. It panics without Sync or Cache (programmer error).
func New(opts Options) (*PodWorkers, error) {
	if opts.Sync == nil || opts.Cache == nil {
		panic("podworkers: Options.Sync and Options.Cache are required")
	}
	if opts.ResyncInterval <= 0 {
		opts.ResyncInterval = DefaultResyncInterval
	}
	if opts.BackOffPeriod <= 0 {
		opts.BackOffPeriod = DefaultBackOffPeriod
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	duration, err := newWorkerDuration(opts.Registerer)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &PodWorkers{
		duration:       duration,
		sync:           opts.Sync,
		cache:          opts.Cache,
		resyncInterval: opts.ResyncInterval,
		backOffPeriod:  opts.BackOffPeriod,
		logger:         opts.Logger.Named("podworkers"),
		clock:          opts.Clock,
		ctx:            ctx,
		cancel:         cancel,
		pods:           map[k8stypes.UID]*podState{},
		startedStatic:  map[string]k8stypes.UID{},
		waitingStatic:  map[string][]k8stypes.UID{},
	}, nil
}

// Stop cancels every worker's sync and waits for the goroutines to exit. Later
// updates are ignored.
func (p *PodWorkers) Stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.cancel()
	p.wg.Wait()
}

// UpdatePod hands an update to the pod's worker, starting the worker the first
// time a UID is seen. It never blocks. See the package doc for how updates
// merge and when termination starts.
func (p *PodWorkers) UpdatePod(opts UpdatePodOptions) {
	uid, name, ns, isRuntimePod, ok := p.identify(&opts)
	if !ok {
		closeKill(opts.KillPodOptions)
		return
	}
	log := p.logger.With(zap.String("pod", ns+"/"+name), zap.String("podUID", string(uid)), zap.Stringer("updateType", opts.UpdateType))

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		log.Debug("pod workers stopped, update ignored")
		closeKill(opts.KillPodOptions)
		return
	}
	now := p.clock.Now()
	st, known := p.pods[uid]
	if !known {
		st = &podState{syncedAt: now, fullname: name + "_" + ns}
		p.pods[uid] = st
	}

	pod := opts.Pod
	if isRuntimePod {
		st.observedRuntime = true
		pod = p.runtimePodSpec(st, &opts)
	}
	if known && st.terminationRequested() && opts.UpdateType == SyncPodCreate {
		log.Debug("pod is terminating; restart with the same UID deferred until SyncKnownPods forgets it")
		st.restartRequested = true
		closeKill(opts.KillPodOptions)
		return
	}
	if st.finished {
		log.Debug("pod worker finished, update ignored")
		closeKill(opts.KillPodOptions)
		return
	}

	becameTerminating := false
	if !st.terminationRequested() {
		if reason := terminationReason(&opts, pod, isRuntimePod); reason != "" {
			log.Debug("pod termination requested", zap.String("reason", reason))
			st.terminatingAt = now
			st.deleted = isRuntimePod || pod.DeletionTimestamp != nil
			becameTerminating = true
		}
	}

	if st.terminated() && isRuntimePod {
		return // a stale runtime view of a pod being cleaned up
	}
	if opts.KillPodOptions != nil && opts.KillPodOptions.Evict {
		st.evicted = true
	}
	shortened := recordKill(st, pod, &opts)

	if !known {
		p.startWorker(uid, st, pod)
	}
	if opts.StartTime.IsZero() {
		opts.StartTime = now
	}
	if st.pending != nil && st.pending.StartTime.Before(opts.StartTime) {
		opts.StartTime = st.pending.StartTime
	}
	st.pending = &opts
	st.working = true
	st.notify()
	if (becameTerminating || shortened) && st.cancel != nil {
		log.Debug("interrupting the sync in flight", zap.Bool("shortenedGracePeriod", shortened))
		st.cancel()
	}
}

// recordKill settles the update's KillPodOptions against the pod's state: a
// terminating pod records the kill's completion channel and the (possibly
// shorter) grace period, which the update then carries; otherwise the kill
// options are dropped and their channel closed. It reports whether the grace
// period got shorter. Caller holds mu.
func recordKill(st *podState, pod *v1.Pod, opts *UpdatePodOptions) (shortened bool) {
	if st.terminated() || !st.terminationRequested() {
		closeKill(opts.KillPodOptions)
		opts.KillPodOptions = nil
		return false
	}
	var override *int64
	if k := opts.KillPodOptions; k != nil {
		override = k.PodTerminationGracePeriodSecondsOverride
		if k.CompletedCh != nil {
			st.completions = append(st.completions, k.CompletedCh)
		}
	}
	st.gracePeriod, shortened = effectiveGracePeriod(st.gracePeriod, pod, override)
	gp := st.gracePeriod
	opts.KillPodOptions = &KillPodOptions{PodTerminationGracePeriodSecondsOverride: &gp}
	return shortened
}

// identify validates an update and names its pod. A RunningPod is only used
// when Pod is nil, and then only to kill.
func (p *PodWorkers) identify(opts *UpdatePodOptions) (uid k8stypes.UID, name, ns string, isRuntimePod, ok bool) {
	switch {
	case opts.Pod != nil:
		opts.RunningPod = nil
		return opts.Pod.UID, opts.Pod.Name, opts.Pod.Namespace, false, true
	case opts.RunningPod == nil:
		p.logger.Error("pod update without Pod or RunningPod ignored", zap.Stringer("updateType", opts.UpdateType))
		return "", "", "", false, false
	case opts.UpdateType != SyncPodKill:
		p.logger.Info("pod update ignored: runtime pods can only be killed",
			zap.String("podUID", string(opts.RunningPod.ID)), zap.Stringer("updateType", opts.UpdateType))
		return "", "", "", false, false
	}
	rp := opts.RunningPod
	return rp.ID, rp.Name, rp.Namespace, true, true
}

// runtimePodSpec picks the pod spec for a RunningPod-only update: the newest
// spec the worker knows (the update then carries it), else a placeholder
// built from the runtime pod. Caller holds mu.
func (p *PodWorkers) runtimePodSpec(st *podState, opts *UpdatePodOptions) *v1.Pod {
	for _, u := range []*UpdatePodOptions{st.pending, st.active} {
		if u != nil && u.Pod != nil {
			opts.Pod, opts.RunningPod = u.Pod, nil
			return u.Pod
		}
	}
	return placeholderPod(opts.RunningPod)
}

// placeholderPod is the API pod standing in for an orphaned runtime pod.
func placeholderPod(rp *kubecontainer.Pod) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: rp.ID, Name: rp.Name, Namespace: rp.Namespace}}
}

// terminationReason says why this update starts termination, or "".
func terminationReason(opts *UpdatePodOptions, pod *v1.Pod, isRuntimePod bool) string {
	switch {
	case isRuntimePod:
		return "orphaned in the runtime"
	case pod.DeletionTimestamp != nil:
		return "marked for deletion"
	case pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed:
		return "terminal phase " + string(pod.Status.Phase)
	case opts.UpdateType == SyncPodKill:
		return "killed"
	}
	return ""
}

// closeKill closes the completion channel of a kill that needs no waiting.
func closeKill(k *KillPodOptions) {
	if k != nil && k.CompletedCh != nil {
		close(k.CompletedCh)
	}
}

// startWorker starts the goroutine of a new pod. Caller holds mu.
func (p *PodWorkers) startWorker(uid k8stypes.UID, st *podState, pod *v1.Pod) {
	st.wake = make(chan struct{}, 1)
	if kubecontainer.IsStaticPod(pod) {
		p.waitingStatic[st.fullname] = append(p.waitingStatic[st.fullname], uid)
	}
	p.wg.Add(1)
	go func() {
		defer logging.HandleCrash(p.logger, "pod worker")
		p.workerLoop(uid, st.wake)
	}()
}

// IsPodKnownTerminated reports whether the pod's containers are known to be
// stopped (SyncTerminatingPod succeeded). Unknown pods: false.
func (p *PodWorkers) IsPodKnownTerminated(uid k8stypes.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[uid]
	return ok && st.terminated()
}

// CouldHaveRunningContainers reports whether the pod may still have running
// containers: true for known pods until they are terminated, and for unknown
// pods until SyncKnownPods ran once.
func (p *PodWorkers) CouldHaveRunningContainers(uid k8stypes.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.pods[uid]; ok {
		return !st.terminated()
	}
	return !p.podsSynced
}

// IsPodTerminationRequested reports whether termination of a known pod was
// requested (it may still be setting up). Unknown pods: false.
func (p *PodWorkers) IsPodTerminationRequested(uid k8stypes.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.pods[uid]
	return ok && st.terminationRequested()
}

// ShouldPodContainersBeTerminating reports whether no new container of the pod
// may start: its worker has seen the termination, or (after SyncKnownPods) the
// pod is unknown.
func (p *PodWorkers) ShouldPodContainersBeTerminating(uid k8stypes.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.pods[uid]; ok {
		return st.startedTerminating
	}
	return p.podsSynced
}

// ShouldPodRuntimeBeRemoved reports whether the pod's runtime resources (its
// containers and sandboxes) may be removed: it is terminated, or (after
// SyncKnownPods) unknown.
func (p *PodWorkers) ShouldPodRuntimeBeRemoved(uid k8stypes.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.pods[uid]; ok {
		return st.terminated()
	}
	return p.podsSynced
}

// ShouldPodContentBeRemoved reports whether everything of the pod (volumes,
// directories) may be removed: it was deleted or evicted and is terminated,
// or (after SyncKnownPods) it is unknown.
func (p *PodWorkers) ShouldPodContentBeRemoved(uid k8stypes.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.pods[uid]; ok {
		return (st.deleted || st.evicted) && st.terminated()
	}
	return p.podsSynced
}

// ShouldPodBeFinished reports whether SyncTerminatedPod completed for the pod,
// or (after SyncKnownPods) the pod is unknown.
func (p *PodWorkers) ShouldPodBeFinished(uid k8stypes.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.pods[uid]; ok {
		return st.finished
	}
	return p.podsSynced
}
