package prober

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Runner runs a command in a container; *kuberuntime.Manager satisfies it. A command
// that ran and exited non-zero must be reported as an error with an ExitStatus() int
// method (k8s.io/utils/exec.CodeExitError does). A command that ran out of time should
// be reported as an error matching context.DeadlineExceeded, a gRPC DeadlineExceeded
// status, an error with Timeout() true, or one saying "timed out" (cri-client's
// ErrCommandTimedOut). Any other error means the probe could not run.
type Runner interface {
	RunInContainer(ctx context.Context, id kubecontainer.ContainerID, cmd []string, timeout time.Duration) ([]byte, error)
}

// StatusProvider returns a pod's latest API status (container IDs, states, Started,
// pod IP). The kubelet's status manager satisfies it.
type StatusProvider interface {
	GetPodStatus(uid k8stypes.UID) (v1.PodStatus, bool)
}

// Options configures a Manager.
type Options struct {
	// Runner runs exec probes. Without it exec probes error (and are ignored).
	Runner Runner
	// Status provides the pods' statuses. Without it no probe runs.
	Status StatusProvider
	// Logger is the logger; nil means no logging.
	Logger *zap.Logger
	// Recorder records pod events ("Unhealthy", "ProbeWarning"); nil means none.
	Recorder record.EventRecorder
	// Results receives the probe results. Build it first and share it with
	// the runtime manager, which reads the failures (so neither needs the
	// other to be built first); nil means a new one.
	Results *Results
	// RestartRules says which stopped containers run again, so that the
	// workers of the others stop (the ContainerRestartRules gate); the zero
	// value is upstream's default.
	RestartRules kubecontainer.RestartRules
}

// probeKey names one worker.
type probeKey struct {
	podUID    k8stypes.UID
	container string
	probeType ProbeType
}

// podProber runs a single probe once; *prober implements it and tests fake it.
type podProber interface {
	probe(ctx context.Context, t ProbeType, pod *v1.Pod, status *v1.PodStatus, c *v1.Container, id kubecontainer.ContainerID) (Result, error)
}

// Manager owns the probe workers; they write their results to its Results
// (whose methods it has).
type Manager struct {
	*Results

	status  StatusProvider
	logger  *zap.Logger
	prober  podProber
	metrics *probeMetrics
	rules   kubecontainer.RestartRules

	// start is when the manager was built: workers started soon after it spread their
	// first probe over one period (as upstream does after a kubelet restart).
	start time.Time
	// second is the unit of periodSeconds and initialDelaySeconds (time.Second; tests
	// shorten it).
	second time.Duration

	mu      sync.RWMutex
	workers map[probeKey]*worker
	pods    map[k8stypes.UID]*v1.Pod
	wg      sync.WaitGroup
}

// NewManager wires a Manager. It starts nothing; AddPod starts workers.
func NewManager(opts Options) *Manager {
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	logger = logger.Named("prober")
	status := opts.Status
	if status == nil {
		status = noStatus{}
	}
	results := opts.Results
	if results == nil {
		results = NewResults()
	}
	return &Manager{
		Results: results,
		status:  status,
		logger:  logger,
		prober:  newProber(opts.Runner, opts.Recorder, logger),
		metrics: newProbeMetrics(),
		rules:   opts.RestartRules,
		start:   time.Now(),
		second:  time.Second,
		workers: make(map[probeKey]*worker),
		pods:    make(map[k8stypes.UID]*v1.Pod),
	}
}

type noStatus struct{}

func (noStatus) GetPodStatus(k8stypes.UID) (v1.PodStatus, bool) { return v1.PodStatus{}, false }

// AddPod starts a worker for each probe of each container (and of each restartable
// init container) of the pod that has none yet; it is idempotent. ctx bounds the
// workers' lifetime, so pass a long-lived ctx (the kubelet's run ctx), not a per-sync
// one. A worker that ended (ctx done, pod terminal) is started again by the next AddPod.
func (m *Manager) AddPod(ctx context.Context, pod *v1.Pod) {
	if pod == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pods[pod.UID] = pod
	for _, c := range probedContainers(pod) {
		for _, t := range []ProbeType{Startup, Readiness, Liveness} {
			if probeSpec(t, &c) == nil {
				continue
			}
			key := probeKey{podUID: pod.UID, container: c.Name, probeType: t}
			if _, ok := m.workers[key]; ok {
				continue
			}
			w := newWorker(m, t, pod, c)
			wctx, cancel := context.WithCancel(ctx)
			w.cancel = cancel
			m.workers[key] = w
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				defer logging.HandleCrash(m.logger, "probe worker")
				w.run(wctx)
			}()
			m.logger.Debug("started probe worker", zap.String("pod", podName(pod)),
				zap.String("container", c.Name), zap.Stringer("probe", t))
		}
	}
}

// probedContainers returns the regular containers and the restartable (sidecar) init
// containers, the ones upstream probes.
func probedContainers(pod *v1.Pod) []v1.Container {
	var out []v1.Container
	for _, c := range pod.Spec.InitContainers {
		if isRestartable(&c) {
			out = append(out, c)
		}
	}
	return append(out, pod.Spec.Containers...)
}

func isRestartable(c *v1.Container) bool {
	return kubecontainer.IsSidecar(c)
}

// RemovePod stops every worker of the pod and forgets it.
func (m *Manager) RemovePod(pod *v1.Pod) {
	if pod == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(pod.UID)
}

// CleanupPods stops the workers of every pod not in desired.
func (m *Manager) CleanupPods(desired map[k8stypes.UID]struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	uids := make(map[k8stypes.UID]struct{})
	for key := range m.workers {
		uids[key.podUID] = struct{}{}
	}
	for uid := range m.pods {
		uids[uid] = struct{}{}
	}
	for uid := range uids {
		if _, ok := desired[uid]; !ok {
			m.removeLocked(uid)
		}
	}
}

func (m *Manager) removeLocked(uid k8stypes.UID) {
	delete(m.pods, uid)
	for key, w := range m.workers {
		if key.podUID == uid {
			w.cancel()
			delete(m.workers, key)
		}
	}
}

// removeWorker drops a worker that ended on its own, unless it was replaced already.
func (m *Manager) removeWorker(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.workers[w.key()] == w {
		delete(m.workers, w.key())
	}
}

func (m *Manager) getWorker(key probeKey) (*worker, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	w, ok := m.workers[key]
	return w, ok
}

func (m *Manager) getPod(uid k8stypes.UID) *v1.Pod {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.pods[uid]
}

// wait blocks until every worker goroutine has returned (tests).
func (m *Manager) wait() { m.wg.Wait() }

// UpdatePodStatus sets Started and Ready on the container statuses from the cached
// results: a running container without a startup probe is started; a started, running
// container without a readiness probe is ready; one with a readiness probe is ready
// only after a success. A plain init container is ready once it exited with 0.
func (m *Manager) UpdatePodStatus(uid k8stypes.UID, status *v1.PodStatus) {
	if status == nil {
		return
	}
	for i := range status.ContainerStatuses {
		m.updateContainerStatus(uid, &status.ContainerStatuses[i])
	}
	pod := m.getPod(uid)
	for i := range status.InitContainerStatuses {
		c := &status.InitContainerStatuses[i]
		if spec := initContainerSpec(pod, c.Name); spec != nil && isRestartable(spec) {
			m.updateContainerStatus(uid, c)
			continue
		}
		started := m.isStarted(uid, c)
		c.Started = &started
		c.Ready = c.State.Terminated != nil && c.State.Terminated.ExitCode == 0
	}
}

func initContainerSpec(pod *v1.Pod, name string) *v1.Container {
	if pod == nil {
		return nil
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

func (m *Manager) updateContainerStatus(uid k8stypes.UID, c *v1.ContainerStatus) {
	started := m.isStarted(uid, c)
	c.Started = &started
	c.Ready = started && m.isReady(uid, c)
}

func (m *Manager) isStarted(uid k8stypes.UID, c *v1.ContainerStatus) bool {
	if c.State.Running == nil {
		return false
	}
	if id, err := kubecontainer.ParseContainerID(c.ContainerID); err == nil {
		if r, ok := m.startup.get(id); ok {
			return r == Success
		}
	}
	// A startup probe that has not run yet means not started; no probe means started.
	_, exists := m.getWorker(probeKey{podUID: uid, container: c.Name, probeType: Startup})
	return !exists
}

func (m *Manager) isReady(uid k8stypes.UID, c *v1.ContainerStatus) bool {
	if c.State.Running == nil {
		return false
	}
	if id, err := kubecontainer.ParseContainerID(c.ContainerID); err == nil {
		if r, ok := m.readiness.get(id); ok && r == Success {
			return true
		}
	}
	w, exists := m.getWorker(probeKey{podUID: uid, container: c.Name, probeType: Readiness})
	if !exists {
		return true // no readiness probe: ready while running
	}
	w.trigger() // probe now rather than at the next period
	return false
}

func podName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
