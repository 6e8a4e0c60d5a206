package cpumanager

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/cpuset"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// ReconcilePeriod is upstream's default cpuManagerReconcilePeriod: how often
// the kubelet should call Reconcile.
const ReconcilePeriod = 10 * time.Second

// ErrContainerNotRunning may be returned (wrapped) by Reconcile's update
// callback for a container that has no running instance; Reconcile then
// skips it quietly and tries again next time.
var ErrContainerNotRunning = errors.New("container not running")

// Options configures a Manager.
type Options struct {
	// Policy is "none" (also when empty) or "static".
	Policy string
	// PolicyOptions are cpuManagerPolicyOptions: full-pcpus-only and
	// strict-cpu-reservation are acted on. Upstream's errors (unknown
	// option, gate off, bad value, options that exclude each other) are
	// reproduced; upstream's other options are refused unless "false". The
	// none policy accepts no options.
	PolicyOptions map[string]string
	// OptionGates are the feature gates of the alpha and beta options.
	OptionGates OptionGates
	// Registerer gets upstream's CPU manager series (nil: none).
	Registerer prometheus.Registerer
	// ReservedCPUs is --reserved-cpus. When set it is the static policy's
	// reserved set and ReservedMilliCPU is ignored.
	ReservedCPUs cpuset.CPUSet
	// ReservedMilliCPU is kubeReserved cpu + systemReserved cpu in
	// millicores. The static policy reserves ceil(ReservedMilliCPU/1000)
	// CPUs; 0 is an error, as upstream.
	ReservedMilliCPU int64
	// StateDir holds StateFileName (upstream: the kubelet root directory).
	StateDir string
	// Topology is the machine's CPU topology; nil means DiscoverTopology
	// of SysfsRoot.
	Topology *Topology
	// SysfsRoot is where sysfs is mounted; empty means "/sys".
	SysfsRoot string
	// Logger receives the manager's logs; nil discards them.
	Logger *zap.Logger

	// What Start needs: the active pods (the pod manager's; nil: none),
	// whether every pod source has been seen (nil: always; stale
	// assignments are only dropped after), and for the reconcile loop, run
	// every ReconcilePeriod (cpuManagerReconcilePeriod; 0: no loop) with
	// the static policy, the pod status cache (the containers' IDs and
	// states) and the CRI runtime that sets their cpusets.
	ActivePods      func() []*v1.Pod
	SourcesReady    func() bool
	ReconcilePeriod time.Duration
	Statuses        PodStatuses
	Containers      ContainerUpdater
}

// Manager is the CPU manager. It is safe for concurrent use.
type Manager struct {
	policy       policy
	topo         *Topology
	file         stateFile
	sourcesReady func() bool
	log          *zap.Logger
	loops        lifecycle.Loops // what Start began
	opts         Options

	mu sync.Mutex
	st *state // nil until Start
	// lastUpdate is what Reconcile (or container creation) last gave each
	// container.
	lastUpdate assignments
	activePods func() []*v1.Pod
}

// New checks opts, finds the topology and builds the policy. It does not
// touch the state file; Start does.
func New(opts Options) (*Manager, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log = log.Named("cpumanager")
	if opts.StateDir == "" {
		return nil, errors.New("cpumanager: StateDir is required")
	}
	topo := opts.Topology
	if topo == nil {
		root := opts.SysfsRoot
		if root == "" {
			root = "/sys"
		}
		var err error
		if topo, err = DiscoverTopology(root); err != nil {
			return nil, err
		}
	}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	pol, err := newPolicy(opts, topo, met, log)
	if err != nil {
		return nil, err
	}
	return &Manager{
		opts:       opts,
		policy:     pol,
		topo:       topo,
		file:       stateFile{dir: opts.StateDir, policy: pol.name()},
		log:        log,
		lastUpdate: assignments{},
	}, nil
}

// newPolicy builds the configured policy with upstream's error messages.
func newPolicy(opts Options, topo *Topology, met *metrics, log *zap.Logger) (policy, error) {
	switch opts.Policy {
	case PolicyNone, "":
		p, err := newNonePolicy(opts.PolicyOptions)
		if err != nil {
			return nil, fmt.Errorf("new none policy error: %w", err)
		}
		return p, nil
	case PolicyStatic:
		log.Info("Detected CPU topology", zap.Stringer("topology", topo))
		numReserved := opts.ReservedCPUs.Size()
		if numReserved == 0 {
			// Upstream leaves a zero kube+system reservation out of the
			// node-allocatable reservation, hence this message for 0.
			if opts.ReservedMilliCPU <= 0 {
				return nil, errors.New("[cpumanager] unable to determine reserved CPU resources for static policy")
			}
			numReserved = int((opts.ReservedMilliCPU + 999) / 1000)
		}
		o, err := parseStaticOptions(opts.PolicyOptions, opts.OptionGates)
		if err != nil {
			return nil, fmt.Errorf("new static policy error: %w", err)
		}
		p, err := newStaticPolicy(topo, numReserved, opts.ReservedCPUs, o, met, log)
		if err != nil {
			return nil, fmt.Errorf("new static policy error: %w", err)
		}
		return p, nil
	default:
		return nil, fmt.Errorf("unknown policy: \"%s\"", opts.Policy)
	}
}

// Start loads the state file (creating it when missing), lets the policy
// validate it and drops the assignments of containers that are not in
// activePods. Stale assignments are only dropped while sourcesReady reports
// that every pod source has been seen, so that the active pod list is
// complete (nil: always), as upstream guards. A state file of another policy,
// a corrupt one or one that does not fit this machine is an error: as
// upstream, the kubelet must not start until the operator removes it.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.start(m.opts.ActivePods, m.opts.SourcesReady); err != nil {
		return fmt.Errorf("start cpu manager error: %w", err) // upstream's
	}
	if m.policy.name() == PolicyNone || m.opts.ReconcilePeriod <= 0 {
		return nil
	}
	if m.opts.Statuses == nil || m.opts.Containers == nil {
		return errors.New("cpumanager: the reconcile loop needs Statuses and Containers")
	}
	m.loops.Go(m.log, "CPU manager reconcile", func() {
		wait.UntilWithContext(ctx, func(ctx context.Context) { m.Reconcile(ctx, nil, m.updateContainer) }, m.opts.ReconcilePeriod)
	})
	return nil
}

// Wait returns once the reconcile loop Start began has ended.
func (m *Manager) Wait() { m.loops.Wait() }

// start is Start's work before the loop.
func (m *Manager) start(activePods func() []*v1.Pod, sourcesReady func() bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log.Info("Starting", zap.String("policy", m.policy.name()))
	st, found, err := m.file.load()
	if err != nil {
		m.log.Error("Could not initialize checkpoint manager, please drain node and remove policy state file", zap.Error(err))
		return err
	}
	if !found {
		st = &state{defaultSet: cpuset.New(), assignments: assignments{}}
	}
	before := st.defaultSet
	if err := m.policy.start(st); err != nil {
		m.log.Error("Policy start error", zap.Error(err))
		return err
	}
	m.st = st
	m.activePods = activePods
	if m.sourcesReady = sourcesReady; m.sourcesReady == nil {
		m.sourcesReady = func() bool { return true }
	}
	changed := m.removeStaleLocked()
	if !found || changed || !before.Equals(st.defaultSet) {
		if err := m.file.save(st); err != nil {
			return err
		}
	}
	return nil
}

// Allocate gives container its CPUs at admission (static policy: exclusive
// CPUs for Guaranteed pods with whole-CPU requests; none: nothing). Call it
// for each container in upstream's order: init containers, then app
// containers, as in pod.Spec.
//
// An error rejects the pod. Upstream's topology manager admission turns it
// into reason "UnexpectedAdmissionError" and message
// "Allocate failed due to <err>, which is unexpected"; the kubelet sets the
// pod Failed with that reason and message "Pod was rejected: " + message,
// e.g. "Pod was rejected: Allocate failed due to not enough cpus available
// to satisfy request: requested=4, available=1, which is unexpected".
func (m *Manager) Allocate(pod *v1.Pod, container *v1.Container) error {
	return m.allocate(pod, container, 0)
}

// errNotStarted is Allocate's error before Start.
var errNotStarted = errors.New("cpumanager: Allocate before Start")

// allocate is Allocate with a NUMA affinity (0: none).
func (m *Manager) allocate(pod *v1.Pod, container *v1.Container, affinity topologymanager.Mask) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return errNotStarted
	}
	changed := m.removeStaleLocked()
	before := m.st.defaultSet
	_, had := m.st.assignments.get(string(pod.UID), container.Name)
	err := m.policy.allocate(m.st, pod, container, affinity)
	_, has := m.st.assignments.get(string(pod.UID), container.Name)
	if changed || had != has || !before.Equals(m.st.defaultSet) {
		m.persistLocked()
	}
	if err != nil {
		m.log.Error("policy error", zap.Error(err))
		return err
	}
	return nil
}

// CPUSet is what a container's cpuset_cpus should be set to when created:
// its exclusive CPUs, or the shared pool for others. ok is false when
// nothing is to be set (policy none, or before Start).
func (m *Manager) CPUSet(podUID, containerName string) (cpuset.CPUSet, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return cpuset.New(), false
	}
	set := m.policy.affinity(m.st, podUID, containerName)
	return set, !set.IsEmpty()
}

// ExclusiveCPUs are the container's exclusive CPUs; ok is false when it
// has none (upstream's GetExclusiveCPUs: what the PodResources API reports
// and what admission checks a pod holds; not the shared pool).
func (m *Manager) ExclusiveCPUs(podUID, containerName string) (cpuset.CPUSet, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return cpuset.New(), false
	}
	return m.st.assignments.get(podUID, containerName)
}

// AddContainer records that a container was created with its exclusive
// CPUs, so that Reconcile does not push them again (upstream's AddContainer).
func (m *Manager) AddContainer(podUID, containerName string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return
	}
	if set, ok := m.st.assignments.get(podUID, containerName); ok {
		m.lastUpdate.set(podUID, containerName, set)
	}
}

// RemoveContainer releases a container's exclusive CPUs (those not shared
// with a sibling) to the pool and persists the state.
func (m *Manager) RemoveContainer(podUID, containerName string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return nil
	}
	m.removeLocked(podUID, containerName)
	return m.file.save(m.st)
}

// RemovePod releases every container of a pod and persists the state.
func (m *Manager) RemovePod(podUID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return nil
	}
	for name := range m.st.assignments[podUID] {
		m.removeLocked(podUID, name)
	}
	delete(m.lastUpdate, podUID)
	return m.file.save(m.st)
}

func (m *Manager) removeLocked(podUID, containerName string) {
	m.policy.removeContainer(m.st, podUID, containerName)
	m.lastUpdate.remove(podUID, containerName)
}

// removeStaleLocked drops the assignments of containers of pods that are
// not active, when the sources are ready. It reports whether it dropped any.
func (m *Manager) removeStaleLocked() bool {
	if m.activePods == nil || m.sourcesReady == nil || !m.sourcesReady() {
		return false
	}
	active := map[string]map[string]bool{}
	for _, pod := range m.activePods() {
		names := map[string]bool{}
		for _, c := range pod.Spec.InitContainers {
			names[c.Name] = true
		}
		for _, c := range pod.Spec.Containers {
			names[c.Name] = true
		}
		active[string(pod.UID)] = names
	}
	changed := false
	for pod, containers := range m.st.assignments.clone() {
		for name := range containers {
			if active[pod][name] {
				continue
			}
			m.log.Info("removing stale container", zap.String("podUID", pod), zap.String("containerName", name))
			m.removeLocked(pod, name)
			changed = true
		}
	}
	for pod, containers := range m.lastUpdate.clone() {
		for name := range containers {
			if !active[pod][name] {
				m.lastUpdate.remove(pod, name)
			}
		}
	}
	return changed
}

// persistLocked saves the state; as upstream, a failure is logged and the
// in-memory state stays authoritative.
func (m *Manager) persistLocked() {
	if err := m.file.save(m.st); err != nil {
		m.log.Error("Failed to store state to checkpoint", zap.Error(err))
	}
}
