package topologymanager

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
)

// HintProvider is a resource manager whose allocations the topology manager
// aligns (upstream's HintProvider). A nil or empty map means no preference;
// a resource with an empty (non-nil) list cannot be satisfied.
type HintProvider interface {
	// TopologyHints are the hints of one container's resources.
	TopologyHints(pod *v1.Pod, c *v1.Container) map[string][]Hint
	// PodTopologyHints are the hints of the pod's resources as a whole.
	PodTopologyHints(pod *v1.Pod) map[string][]Hint
	// AllocateAligned allocates the container's resources, on the NUMA
	// nodes of the merged hint first (affinity 0: anywhere; Preferred as
	// the policy found it).
	AllocateAligned(pod *v1.Pod, c *v1.Container, hint Hint) error
}

// Options builds a Manager.
type Options struct {
	Policy, Scope string
	PolicyOptions map[string]string
	// NUMANodes are the machine's NUMA nodes; Distances their distance rows
	// (devices/system/node/nodeN/distance), needed with
	// prefer-closest-numa-nodes.
	NUMANodes []int
	Distances map[int][]uint64
	// Providers in upstream's order: devices, then CPUs.
	Providers  []HintProvider
	Registerer prometheus.Registerer // nil: no metrics
	Logger     *zap.Logger
}

// Manager is the topology manager. The merged hint goes to the providers'
// allocation directly (upstream's providers read it back from a store), so
// it keeps no per-pod state.
type Manager struct {
	policy    *policy
	scope     string
	providers []HintProvider
	logger    *zap.Logger
	metrics   *metrics
}

// New checks the policy, scope and options as upstream's NewManager does
// (with policy none, nothing but the providers is used).
func New(opts Options) (*Manager, error) {
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	m := &Manager{providers: opts.Providers, logger: logger}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	m.metrics = met
	if opts.Policy == PolicyNone || opts.Policy == "" {
		m.policy, m.scope = &policy{name: PolicyNone}, PolicyNone
		return m, nil
	}
	o, err := parseOptions(opts.PolicyOptions)
	if err != nil {
		return nil, err
	}
	numa := numaInfo{nodes: opts.NUMANodes, distances: map[int][]uint64{}}
	if o.preferClosest {
		for _, n := range opts.NUMANodes {
			d := opts.Distances[n]
			if d == nil {
				return nil, fmt.Errorf("cannot discover NUMA topology: error getting NUMA distances from cadvisor")
			}
			numa.distances[n] = d
		}
	}
	if len(numa.nodes) > o.maxNUMANodes {
		return nil, fmt.Errorf("unsupported on machines with more than %v NUMA Nodes", o.maxNUMANodes)
	}
	switch opts.Policy {
	case PolicyBestEffort, PolicyRestricted, PolicySingleNUMANode:
	default:
		return nil, fmt.Errorf("unknown policy: %q", opts.Policy)
	}
	switch opts.Scope {
	case ScopeContainer, ScopePod:
	case "":
		opts.Scope = ScopeContainer
	default:
		return nil, fmt.Errorf("unknown scope: %q", opts.Scope)
	}
	m.policy, m.scope = &policy{name: opts.Policy, opts: o, numa: numa}, opts.Scope
	m.metrics.initAligned()
	return m, nil
}

// Reasons and messages of a refused pod (upstream's).
const (
	ReasonTopologyAffinity  = "TopologyAffinityError"
	messageTopologyAffinity = "Resources cannot be allocated with Topology locality"
	reasonUnexpected        = "UnexpectedAdmissionError"
)

// Admit allocates the pod's resources through the providers, aligned as
// the policy wants, container by container (init containers first) or for
// the pod as a whole: the hints are merged and the pod refused with
// TopologyAffinityError when the policy does not admit the result, else the
// providers allocate on the merged NUMA nodes. A provider's error refuses
// the pod as upstream: its own reason when it has one (an error with a
// Type), else UnexpectedAdmissionError. Nothing is rolled back here (the
// kubelet releases a refused pod's allocations).
func (m *Manager) Admit(pod *v1.Pod) (reason, message string, ok bool) {
	m.metrics.requests.Inc()
	start := time.Now()
	defer func() { m.metrics.duration.Observe(float64(time.Since(start).Milliseconds())) }()
	containers := make([]*v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		containers = append(containers, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		containers = append(containers, &pod.Spec.Containers[i])
	}
	switch m.scope {
	case PolicyNone:
		for _, c := range containers {
			if err := m.allocate(pod, c, Hint{}); err != nil {
				return admissionError(err)
			}
		}
		return "", "", true
	case ScopePod:
		hints := make([]map[string][]Hint, 0, len(m.providers))
		for _, p := range m.providers {
			hints = append(hints, p.PodTopologyHints(pod))
		}
		best, admit := m.policy.merge(hints)
		if !admit {
			return m.refuse()
		}
		for _, c := range containers {
			if err := m.allocate(pod, c, best); err != nil {
				m.metrics.errors.Inc()
				return admissionError(err)
			}
		}
		m.metrics.aligned(m.scope, m.policy.name, true)
		return "", "", true
	}
	for _, c := range containers {
		hints := make([]map[string][]Hint, 0, len(m.providers))
		for _, p := range m.providers {
			hints = append(hints, p.TopologyHints(pod, c))
		}
		best, admit := m.policy.merge(hints)
		m.logger.Debug("Best TopologyHint", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("containerName", c.Name),
			zap.Stringer("affinity", best.Affinity), zap.Bool("preferred", best.Preferred))
		if !admit {
			return m.refuse()
		}
		if err := m.allocate(pod, c, best); err != nil {
			m.metrics.errors.Inc()
			return admissionError(err)
		}
		m.metrics.aligned(m.scope, m.policy.name, true)
	}
	return "", "", true
}

func (m *Manager) refuse() (string, string, bool) {
	m.metrics.aligned(m.scope, m.policy.name, false)
	m.metrics.errors.Inc()
	return ReasonTopologyAffinity, messageTopologyAffinity, false
}

func (m *Manager) allocate(pod *v1.Pod, c *v1.Container, hint Hint) error {
	for _, p := range m.providers {
		if err := p.AllocateAligned(pod, c, hint); err != nil {
			return err
		}
	}
	return nil
}

// Policy and Scope are the manager's policy and scope ("none" scope with
// policy none).
func (m *Manager) Policy() string { return m.policy.name }
func (m *Manager) Scope() string  { return m.scope }

// typedError is an allocation error with its own admission reason
// (upstream's Type()).
type typedError interface {
	error
	Type() string
}

func admissionError(err error) (string, string, bool) {
	var te typedError
	if errors.As(err, &te) {
		return te.Type(), te.Error(), false
	}
	return reasonUnexpected, fmt.Sprintf("Allocate failed due to %v, which is unexpected", err), false
}
