package cpumanager

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/utils/cpuset"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// The CPU manager is a topology manager hint provider (static policy only:
// policy none has no preference and allocates nothing).
var _ topologymanager.HintProvider = (*Manager)(nil)

// TopologyHints are the NUMA placements a container's exclusive CPUs could
// have, as upstream's static policy computes them: none for a container
// without exclusive CPUs; for one that has them already, the placements of
// those (none at all if their number changed); else every set of NUMA nodes
// holding enough free CPUs (the pod's reusable init container CPUs all in
// it), preferred when as narrow as the request could be on an empty node.
func (m *Manager) TopologyHints(pod *v1.Pod, c *v1.Container) map[string][]topologymanager.Hint {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.staticForHintsLocked()
	if p == nil {
		return nil
	}
	requested := guaranteedCPUs(pod, c)
	if requested == 0 || resourcehelper.IsPodLevelResourcesSet(pod) {
		return nil
	}
	if set, ok := m.st.assignments.get(string(pod.UID), c.Name); ok {
		if set.Size() != requested {
			return map[string][]topologymanager.Hint{string(v1.ResourceCPU): {}}
		}
		return map[string][]topologymanager.Hint{string(v1.ResourceCPU): p.hints(set, cpuset.New(), requested)}
	}
	return map[string][]topologymanager.Hint{string(v1.ResourceCPU): p.hints(p.available(m.st), p.cpusToReuse[string(pod.UID)], requested)}
}

// PodTopologyHints are TopologyHints for the pod's exclusive CPUs as a
// whole (pod scope).
func (m *Manager) PodTopologyHints(pod *v1.Pod) map[string][]topologymanager.Hint {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.staticForHintsLocked()
	if p == nil {
		return nil
	}
	requested := podGuaranteedCPUs(pod)
	if requested == 0 || resourcehelper.IsPodLevelResourcesSet(pod) {
		return nil
	}
	assigned := cpuset.New()
	for _, c := range kubecontainer.PodContainers(pod) {
		if set, ok := m.st.assignments.get(string(pod.UID), c.Name); ok {
			if set.Size() != guaranteedCPUs(pod, c) {
				return map[string][]topologymanager.Hint{string(v1.ResourceCPU): {}}
			}
			assigned = assigned.Union(set)
		}
	}
	if assigned.Size() == requested {
		return map[string][]topologymanager.Hint{string(v1.ResourceCPU): p.hints(assigned, cpuset.New(), requested)}
	}
	reusable := p.cpusToReuse[string(pod.UID)].Union(assigned)
	return map[string][]topologymanager.Hint{string(v1.ResourceCPU): p.hints(p.available(m.st), reusable, requested)}
}

// staticForHintsLocked is the static policy once started (nil otherwise),
// after the stale assignments are dropped (and the state saved), as
// upstream's hint providers do first.
func (m *Manager) staticForHintsLocked() *staticPolicy {
	p, ok := m.policy.(*staticPolicy)
	if !ok || m.st == nil {
		return nil
	}
	if m.removeStaleLocked() {
		m.persistLocked()
	}
	return p
}

// AllocateAligned is Allocate with the topology manager's NUMA affinity:
// the CPUs are taken from those NUMA nodes first.
func (m *Manager) AllocateAligned(pod *v1.Pod, c *v1.Container, hint topologymanager.Hint) error {
	return m.allocate(pod, c, hint.Affinity)
}

// hints lists, for every set of NUMA nodes, a hint when its CPUs of
// available plus reusable (which must all be on those nodes) hold request;
// preferred are those as narrow as the fewest nodes whose CPUs (all of them,
// free or not) could hold it.
func (p *staticPolicy) hints(available, reusable cpuset.CPUSet, request int) []topologymanager.Hint {
	nodes := p.topo.CPUDetails.NUMANodes().List()
	minSize := len(nodes)
	hints := []topologymanager.Hint{}
	topologymanager.EachMask(nodes, func(mask topologymanager.Mask) {
		in := mask.Nodes()
		if p.topo.CPUDetails.CPUsInNUMANodes(in...).Size() >= request && mask.Count() < minSize {
			minSize = mask.Count()
		}
		n := 0
		for _, cpu := range reusable.UnsortedList() {
			if !mask.Has(p.topo.CPUDetails[cpu].NUMANodeID) {
				return
			}
			n++
		}
		n += available.Intersection(p.topo.CPUDetails.CPUsInNUMANodes(in...)).Size()
		if n >= request {
			hints = append(hints, topologymanager.Hint{Affinity: mask})
		}
	})
	for i := range hints {
		hints[i].Preferred = hints[i].Affinity.Count() == minSize
	}
	return hints
}

// takeAligned takes numCPUs of allocatable by topology, those on the NUMA
// nodes of affinity first (0: anywhere), then the rest from the others.
func (p *staticPolicy) takeAligned(allocatable cpuset.CPUSet, numCPUs int, affinity topologymanager.Mask) (cpuset.CPUSet, error) {
	result := cpuset.New()
	if affinity != 0 {
		aligned := allocatable.Intersection(p.topo.CPUDetails.CPUsInNUMANodes(affinity.Nodes()...))
		set, err := takeByTopology(p.topo, aligned, min(numCPUs, aligned.Size()))
		if err != nil {
			return cpuset.New(), err
		}
		result = set
	}
	rest, err := takeByTopology(p.topo, allocatable.Difference(result), numCPUs-result.Size())
	if err != nil {
		return cpuset.New(), err
	}
	return result.Union(rest), nil
}

// podGuaranteedCPUs is the pod's exclusive CPUs as upstream counts them: the
// larger of the app containers' plus the sidecars', and of each regular init
// container's plus the sidecars started before it.
func podGuaranteedCPUs(pod *v1.Pod) int {
	initMax, sidecars := 0, 0
	for i := range pod.Spec.InitContainers {
		ic := &pod.Spec.InitContainers[i]
		r := guaranteedCPUs(pod, ic)
		if kubecontainer.IsSidecar(ic) {
			sidecars += r
		} else if sidecars+r > initMax {
			initMax = sidecars + r
		}
	}
	app := 0
	for i := range pod.Spec.Containers {
		app += guaranteedCPUs(pod, &pod.Spec.Containers[i])
	}
	return max(initMax, app+sidecars)
}
