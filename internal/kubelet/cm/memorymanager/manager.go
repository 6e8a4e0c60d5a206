package memorymanager

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/memorymanager/state"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// The policies (memoryManagerPolicy), upstream's names.
const (
	PolicyNone   = "None"
	PolicyStatic = "Static"
)

// NUMANode is one NUMA node's memory.
type NUMANode struct {
	ID          int
	MemoryBytes uint64 // MemTotal
	HugePages   []HugePages
}

// HugePages is one huge page pool of a NUMA node.
type HugePages struct {
	PageSizeKiB, Pages uint64
}

// Options builds a Manager.
type Options struct {
	// Policy is "None" (also when empty) or "Static".
	Policy string
	// Nodes are the machine's NUMA nodes (ReadNUMANodes); Static needs one.
	Nodes []NUMANode
	// NodeReservation is the node allocatable reservation: systemReserved
	// + kubeReserved + the hard eviction thresholds, by resource.
	NodeReservation v1.ResourceList
	// ReservedMemory is reservedMemory (--reserved-memory).
	ReservedMemory []kubeletv1beta1.MemoryReservation
	// StateDir holds state.FileName (upstream: the kubelet root directory).
	StateDir string
	// ActivePods and SourcesReady: the assignments of containers of pods
	// that are not active are dropped, once every pod source was seen (nil:
	// none, always).
	ActivePods   func() []*v1.Pod
	SourcesReady func() bool
	Registerer   prometheus.Registerer // nil: no metrics
	Logger       *zap.Logger
}

// Manager is the memory manager. It is safe for concurrent use.
type Manager struct {
	policy       string
	static       *staticPolicy // nil with None
	file         state.File
	activePods   func() []*v1.Pod
	sourcesReady func() bool
	metrics      *metrics
	log          *zap.Logger

	mu          sync.Mutex
	st          *state.State  // nil until Start
	allocatable []state.Block // set by Start
}

// The memory manager is a topology manager hint provider.
var _ topologymanager.HintProvider = (*Manager)(nil)

// New checks the policy and reservedMemory as upstream's NewManager does;
// it does not touch the state file (Start does).
func New(opts Options) (*Manager, error) {
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if opts.StateDir == "" {
		return nil, errors.New("memorymanager: StateDir is required")
	}
	m := &Manager{file: state.File{Dir: opts.StateDir}, activePods: opts.ActivePods, sourcesReady: opts.SourcesReady,
		log: log.Named("memorymanager")}
	switch opts.Policy {
	case PolicyNone, "":
		m.policy = PolicyNone
	case PolicyStatic:
		if len(opts.Nodes) == 0 {
			return nil, errors.New("[memorymanager] no NUMA node found in sysfs (devices/system/node)")
		}
		reserved, err := systemReserved(opts.Nodes, opts.NodeReservation, opts.ReservedMemory)
		if err != nil {
			return nil, err
		}
		if m.static, err = newStaticPolicy(opts.Nodes, reserved); err != nil {
			return nil, err
		}
		m.policy = PolicyStatic
	default:
		return nil, fmt.Errorf("unknown policy: %q", opts.Policy)
	}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	m.metrics = met
	return m, nil
}

// Policy is the policy's name.
func (m *Manager) Policy() string { return m.policy }

// Start reads the state file (writing it when there is none, as upstream
// does for every policy) and, with Static, checks it against the machine:
// a file of another policy, a corrupt one or one whose machine state does
// not add up is an error, and the kubelet must not start until the
// operator drains the node and removes it. The error is upstream's.
func (m *Manager) Start(context.Context) error {
	if err := m.start(); err != nil {
		return fmt.Errorf("start memory manager error: %w", err)
	}
	return nil
}

// Wait returns at once: the manager runs no loop.
func (m *Manager) Wait() {}

func (m *Manager) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log.Info("Starting memorymanager", zap.String("policy", m.policy))
	st, found, err := m.file.Load(m.policy)
	if err != nil {
		m.log.Error("Could not initialize checkpoint manager, please drain node and remove policy state file", zap.Error(err))
		return err
	}
	if !found {
		st = state.State{Machine: state.NUMANodeMap{}, Assignments: state.ContainerMemoryAssignments{}}
	}
	changed := !found
	if m.static != nil {
		initialized, err := m.static.validateState(&st)
		if err != nil {
			m.log.Error("Invalid state, please drain node and remove policy state file", zap.Error(err))
			return err
		}
		changed = changed || initialized
	}
	m.st = &st
	if m.static != nil {
		for _, id := range st.Machine.NUMANodes() {
			names := make([]string, 0, len(st.Machine[id].MemoryMap))
			for name := range st.Machine[id].MemoryMap {
				names = append(names, string(name))
			}
			slices.Sort(names)
			for _, name := range names {
				if size := st.Machine[id].MemoryMap[v1.ResourceName(name)].Allocatable; size != 0 {
					m.allocatable = append(m.allocatable, state.Block{NUMAAffinity: []int{id}, Type: v1.ResourceName(name), Size: size})
				}
			}
		}
	}
	if changed {
		if err := m.file.Save(m.policy, st); err != nil {
			m.log.Error("Could not save checkpoint", zap.Error(err))
			return err
		}
	}
	return nil
}

// TopologyHints are the NUMA placements a container's memory could have
// (Static, Guaranteed pods only; see staticPolicy.hints).
func (m *Manager) TopologyHints(pod *v1.Pod, c *v1.Container) map[string][]topologymanager.Hint {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.pinnedLocked(pod) {
		return nil
	}
	req, err := containerRequests(c)
	if err != nil {
		m.log.Error("Failed to get container requested resources", zap.String("pod", podRef(pod)), zap.String("containerName", c.Name), zap.Error(err))
		return nil
	}
	if len(req) == 0 {
		return nil
	}
	if blocks := m.st.Blocks(string(pod.UID), c.Name); blocks != nil {
		return regenerateHints(blocks, req)
	}
	return m.static.hints(m.st.Machine, string(pod.UID), req)
}

// PodTopologyHints are the hints for the pod's memory as a whole (pod
// scope): the long-running containers' sum, or the largest init container
// if more.
func (m *Manager) PodTopologyHints(pod *v1.Pod) map[string][]topologymanager.Hint {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.pinnedLocked(pod) {
		return nil
	}
	req, err := podRequests(pod)
	if err != nil {
		m.log.Error("Failed to get pod requested resources", zap.String("pod", podRef(pod)), zap.Error(err))
		return nil
	}
	if len(req) == 0 {
		return nil
	}
	for _, c := range kubecontainer.PodContainers(pod) {
		if blocks := m.st.Blocks(string(pod.UID), c.Name); blocks != nil {
			return regenerateHints(blocks, req)
		}
	}
	return m.static.hints(m.st.Machine, string(pod.UID), req)
}

// pinnedLocked drops stale assignments and says whether the pod's memory is
// pinned: Static, started, a Guaranteed pod without pod-level resources.
func (m *Manager) pinnedLocked(pod *v1.Pod) bool {
	if m.static == nil || m.st == nil {
		return false
	}
	m.removeStaleLocked()
	return isPinned(pod)
}

// AllocateAligned pins the container's memory (Static, Guaranteed pods) on
// the NUMA nodes of the topology manager's hint, widened to nodes that
// hold the request when they do not; see staticPolicy.allocate.
func (m *Manager) AllocateAligned(pod *v1.Pod, c *v1.Container, hint topologymanager.Hint) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		if m.static == nil {
			return nil
		}
		return errors.New("memorymanager: Allocate before Start")
	}
	if !m.pinnedLocked(pod) {
		return nil
	}
	req, err := containerRequests(c)
	if err != nil || len(req) == 0 {
		return err
	}
	m.metrics.requests.Inc()
	if blocks := m.st.Blocks(string(pod.UID), c.Name); blocks != nil {
		m.static.noteReusable(pod, c, blocks)
		m.log.Info("Container already present in state, skipping", zap.String("pod", podRef(pod)), zap.String("containerName", c.Name))
		return nil
	}
	if err := m.static.allocate(*m.st, pod, c, req, hint); err != nil {
		m.metrics.errors.Inc()
		m.log.Error("Allocate error", zap.String("pod", podRef(pod)), zap.String("containerName", c.Name), zap.Error(err))
		return err
	}
	m.persistLocked()
	return nil
}

// NUMANodes are the NUMA nodes of the container's memory, for its
// cpuset.mems (nil: not pinned).
func (m *Manager) NUMANodes(podUID, containerName string) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return nil
	}
	var nodes []int
	for _, b := range m.st.Blocks(podUID, containerName) {
		for _, n := range b.NUMAAffinity {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	slices.Sort(nodes)
	return nodes
}

// PreCreateContainer puts the container's NUMA nodes into its CRI config as
// cpuset_mems, as upstream's internal container lifecycle does.
func (m *Manager) PreCreateContainer(pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) {
	nodes := m.NUMANodes(string(pod.UID), c.Name)
	if len(nodes) == 0 {
		return
	}
	mems := make([]string, len(nodes))
	for i, n := range nodes {
		mems[i] = strconv.Itoa(n)
	}
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	if cfg.Linux.Resources == nil {
		cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{}
	}
	cfg.Linux.Resources.CpusetMems = strings.Join(mems, ",")
}

// PreStartContainer releases the memory of the regular init containers
// before this one (they have run to completion; what they held was reused),
// upstream's AddContainer.
func (m *Manager) PreStartContainer(pod *v1.Pod, c *v1.Container, _ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.static == nil || m.st == nil {
		return
	}
	changed := false
	for i := range pod.Spec.InitContainers {
		init := &pod.Spec.InitContainers[i]
		if init.Name == c.Name {
			break
		}
		if kubecontainer.IsSidecar(init) {
			continue
		}
		changed = m.static.release(*m.st, string(pod.UID), init.Name) || changed
	}
	if changed {
		m.persistLocked()
	}
}

// HoldsPod says whether any container of the pod has pinned memory.
func (m *Manager) HoldsPod(podUID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st != nil && len(m.st.Assignments[podUID]) > 0
}

// RemovePod releases the memory of every container of the pod and saves
// the state.
func (m *Manager) RemovePod(podUID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.static == nil || m.st == nil || len(m.st.Assignments[podUID]) == 0 {
		return nil
	}
	for name := range m.st.Assignments[podUID] {
		m.static.release(*m.st, podUID, name)
	}
	m.static.forgetPod(podUID)
	return m.file.Save(m.policy, *m.st)
}

// Blocks are a copy of the container's blocks (nil: not pinned).
func (m *Manager) Blocks(podUID, containerName string) []state.Block {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return nil
	}
	return state.CloneBlocks(m.st.Blocks(podUID, containerName))
}

// AllocatableMemory is what Static may pin: per NUMA node, each resource
// with allocatable memory, as of Start (upstream's GetAllocatableMemory, the
// PodResources API's allocatable memory); nothing with None.
func (m *Manager) AllocatableMemory() []state.Block {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.allocatable)
}

// State is a copy of the state (machine state and blocks).
func (m *Manager) State() state.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return state.State{}
	}
	return m.st.Clone()
}

// removeStaleLocked releases the memory of containers of pods that are no
// longer active, once every source was seen, and saves the state if it
// did.
func (m *Manager) removeStaleLocked() {
	if m.static == nil || m.activePods == nil || (m.sourcesReady != nil && !m.sourcesReady()) {
		return
	}
	active := map[string]map[string]bool{}
	for _, pod := range m.activePods() {
		names := map[string]bool{}
		for _, c := range kubecontainer.PodContainers(pod) {
			names[c.Name] = true
		}
		active[string(pod.UID)] = names
	}
	changed := false
	for pod, containers := range m.st.Assignments.Clone() {
		for name := range containers {
			if !active[pod][name] {
				m.log.Info("RemoveStaleState removing state", zap.String("podUID", pod), zap.String("containerName", name))
				changed = m.static.release(*m.st, pod, name) || changed
			}
		}
	}
	if changed {
		m.persistLocked()
	}
}

// persistLocked saves the state; as upstream, a failure is logged and the
// in-memory state stays authoritative.
func (m *Manager) persistLocked() {
	if err := m.file.Save(m.policy, *m.st); err != nil {
		m.log.Error("Failed to store state to checkpoint", zap.Error(err))
	}
}

func podRef(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }

// metrics are upstream's memory manager series (pkg/kubelet/metrics).
type metrics struct {
	requests, errors prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "memory_manager_pinning_requests_total",
			Help: "[ALPHA] The number of memory pages allocations which required pinning."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "memory_manager_pinning_errors_total",
			Help: "[ALPHA] The number of memory pages allocations which required pinning that failed."}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("memorymanager: register metrics: %w", err)
		}
	}
	return m, nil
}
