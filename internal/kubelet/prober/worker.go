package prober

import (
	"context"
	"math/rand/v2"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// Upstream API defaults, used when a probe comes without them.
const (
	defaultPeriodSeconds    = 10
	defaultTimeoutSeconds   = 1
	defaultSuccessThreshold = 1
	defaultFailureThreshold = 3
)

// worker probes one container with one probe type until its ctx ends, the pod is
// terminal, or the container exited for good. It reads the container's ID and state from
// the manager's StatusProvider on every tick.
//
// State machine per container ID:
//   - a new container ID resets the counters, stores the initial result (readiness
//     Failure, liveness Success, startup Unknown) and clears onHold;
//   - while onHold (after a liveness/startup Failure) nothing is probed until the
//     container is replaced;
//   - a non-running container is Failure;
//   - probes wait initialDelaySeconds after the container started, liveness and
//     readiness wait for Started, startup stops once Started;
//   - a result is stored once it repeated successThreshold/failureThreshold times.
type worker struct {
	m         *Manager
	probeType ProbeType
	pod       *v1.Pod
	container v1.Container
	spec      v1.Probe // with defaults filled in
	results   *resultsCache
	initial   Result
	manual    chan struct{}
	cancel    func()
	logger    *zap.Logger

	// Owned by the worker goroutine.
	containerID kubecontainer.ContainerID
	lastResult  Result
	resultRun   int
	onHold      bool
}

func newWorker(m *Manager, t ProbeType, pod *v1.Pod, c v1.Container) *worker {
	w := &worker{
		m:         m,
		probeType: t,
		pod:       pod,
		container: c,
		spec:      withDefaults(probeSpec(t, &c)),
		results:   m.cacheFor(t),
		manual:    make(chan struct{}, 1),
		cancel:    func() {},
		logger: m.logger.With(zap.String("pod", podName(pod)), zap.String("container", c.Name),
			zap.Stringer("probe", t)),
	}
	switch t {
	case Readiness:
		w.initial = Failure
	case Liveness:
		w.initial = Success
	default:
		w.initial = Unknown
	}
	return w
}

func probeSpec(t ProbeType, c *v1.Container) *v1.Probe {
	switch t {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	case Startup:
		return c.StartupProbe
	}
	return nil
}

func withDefaults(p *v1.Probe) v1.Probe {
	out := *p
	if out.PeriodSeconds <= 0 {
		out.PeriodSeconds = defaultPeriodSeconds
	}
	if out.TimeoutSeconds <= 0 {
		out.TimeoutSeconds = defaultTimeoutSeconds
	}
	if out.SuccessThreshold <= 0 {
		out.SuccessThreshold = defaultSuccessThreshold
	}
	if out.FailureThreshold <= 0 {
		out.FailureThreshold = defaultFailureThreshold
	}
	return out
}

func (w *worker) key() probeKey {
	return probeKey{podUID: w.pod.UID, container: w.container.Name, probeType: w.probeType}
}

// trigger asks for a probe now; it never blocks.
func (w *worker) trigger() {
	select {
	case w.manual <- struct{}{}:
	default:
	}
}

// run probes every period until ctx ends or doProbe says stop.
func (w *worker) run(ctx context.Context) {
	period := time.Duration(w.spec.PeriodSeconds) * w.m.second
	defer func() {
		if !w.containerID.IsEmpty() {
			w.results.remove(w.containerID)
		}
		w.m.removeWorker(w)
		w.m.metrics.forget(w.probeType, w.pod, w.container.Name)
		w.logger.Debug("probe worker stopped")
	}()

	// Right after a kubelet (re)start, spread the first probes over one period.
	if period > time.Since(w.m.start) {
		if !sleep(ctx, time.Duration(rand.Int64N(int64(period)))) {
			return
		}
	}
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for ctx.Err() == nil && w.doProbe(ctx) {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-w.manual:
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// doProbe probes once and records the result; it reports whether to keep going.
func (w *worker) doProbe(ctx context.Context) bool {
	status, ok := w.m.status.GetPodStatus(w.pod.UID)
	if !ok {
		w.logger.Debug("no status for pod")
		return true
	}
	if status.Phase == v1.PodFailed || status.Phase == v1.PodSucceeded {
		w.logger.Debug("pod is terminated, stopping probe worker", zap.String("phase", string(status.Phase)))
		return false
	}
	c, ok := findContainerStatus(&status, w.container.Name)
	if !ok {
		w.logger.Debug("probe target container not found")
		return true
	}
	w.observeContainer(ctx, c.ContainerID)
	if w.onHold {
		return true
	}
	if c.State.Running == nil {
		w.set(ctx, Failure)
		// Stop when the container will not be restarted.
		return c.State.Terminated == nil || w.mayRestart(c.State.Terminated.ExitCode, &status)
	}
	if w.pod.DeletionTimestamp != nil && (w.probeType == Liveness || w.probeType == Startup) {
		w.logger.Debug("pod deletion requested, setting probe result to success")
		w.set(ctx, Success)
		return false
	}
	if time.Since(c.State.Running.StartedAt.Time) < time.Duration(w.spec.InitialDelaySeconds)*w.m.second {
		return true
	}
	started := c.Started != nil && *c.Started
	if started == (w.probeType == Startup) {
		// Startup probes stop once started; the others wait for it.
		return true
	}
	began := time.Now()
	result, err := w.m.prober.probe(ctx, w.probeType, w.pod, &status, &w.container, w.containerID)
	if ctx.Err() != nil {
		return false // stopped while probing: the result means nothing
	}
	w.m.metrics.observe(w.probeType, w.pod, w.container.Name, result, err, time.Since(began))
	if err != nil {
		return true // the probe could not run: throw the result away
	}
	w.record(ctx, result)
	return true
}

// observeContainer resets the worker when the container was replaced.
func (w *worker) observeContainer(ctx context.Context, rawID string) {
	if w.containerID.String() == rawID {
		return
	}
	id, err := kubecontainer.ParseContainerID(rawID)
	if err != nil {
		w.logger.Debug("bad container ID in status", zap.String("containerID", rawID))
		return
	}
	if !w.containerID.IsEmpty() {
		w.results.remove(w.containerID)
	}
	w.containerID = id
	w.lastResult, w.resultRun, w.onHold = Unknown, 0, false
	w.results.set(ctx, id, w.initial, w.pod.UID)
}

// record applies the thresholds to a fresh result.
func (w *worker) record(ctx context.Context, result Result) {
	if w.lastResult == result {
		w.resultRun++
	} else {
		w.lastResult, w.resultRun = result, 1
	}
	if (result == Failure && w.resultRun < int(w.spec.FailureThreshold)) ||
		(result == Success && w.resultRun < int(w.spec.SuccessThreshold)) {
		return
	}
	w.set(ctx, result)
	if result == Failure && (w.probeType == Liveness || w.probeType == Startup) {
		// The container will be restarted: stop probing until a new container shows up.
		w.onHold = true
		w.resultRun = 0
	}
}

func (w *worker) set(ctx context.Context, r Result) {
	if w.containerID.IsEmpty() {
		return
	}
	if w.results.set(ctx, w.containerID, r, w.pod.UID) {
		w.logger.Debug("probe result changed", zap.Stringer("result", r),
			zap.String("containerID", w.containerID.String()))
	}
}

// findContainerStatus finds a container's status (regular first, then init) that has a
// container ID.
func findContainerStatus(status *v1.PodStatus, name string) (*v1.ContainerStatus, bool) {
	for _, list := range [][]v1.ContainerStatus{status.ContainerStatuses, status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name && list[i].ContainerID != "" {
				return &list[i], true
			}
		}
	}
	return nil, false
}

// mayRestart reports whether the probed container, terminated with exitCode,
// runs again (so the worker keeps going): a sidecar always does; with
// ContainerRestartRules its policies and rules decide, or the pod restarting
// all its containers (status, its current status, tells); without it any pod
// restartPolicy but Never.
func (w *worker) mayRestart(exitCode int32, status *v1.PodStatus) bool {
	switch {
	case isRestartable(&w.container):
		return true
	case w.m.rules.PodPolicyOnly:
		return w.pod.Spec.RestartPolicy != v1.RestartPolicyNever
	}
	return w.m.rules.ShouldRestart(&w.container, &w.pod.Spec, exitCode) ||
		w.m.rules.ShouldAllContainersRestart(w.pod, nil, status)
}
