package devicemanager

import (
	"slices"
	"sort"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
)

// The device manager is a topology manager hint provider.
var _ topologymanager.HintProvider = (*Manager)(nil)

// TopologyHints are the NUMA placements of a container's devices, as
// upstream's device manager computes them: none (no preference) for a
// resource whose devices report no topology; for devices the container
// has, their placements (none at all if the request changed); else every
// set of the NUMA nodes holding the resource's devices where enough free
// (and reusable) devices are, preferred when as narrow as the devices on
// those nodes could hold the request.
func (m *Manager) TopologyHints(pod *v1.Pod, c *v1.Container) map[string][]topologymanager.Hint {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.freeInactiveAndSave(string(pod.UID))
	uid, isInit := string(pod.UID), isInitContainer(pod, c)
	hints := map[string][]topologymanager.Hint{}
	for _, res := range m.deviceResources(c.Resources.Limits) {
		q := c.Resources.Limits[v1.ResourceName(res)]
		requested := int(q.Value())
		p := m.plugins[res]
		if p == nil || !p.hasTopology() {
			hints[res] = nil
			continue
		}
		if al := m.allocated.get(uid, c.Name, res); al != nil {
			if len(al.ids) != requested {
				hints[res] = []topologymanager.Hint{}
				continue
			}
			hints[res] = m.deviceHints(p, sets.New(al.ids...), nil, requested)
			continue
		}
		available := sets.New(p.healthy()...).Difference(m.allocated.inUse(res))
		reusable := m.reusable(pod, c, isInit, res)
		if available.Union(reusable).Len() < requested {
			hints[res] = []topologymanager.Hint{}
			continue
		}
		hints[res] = m.deviceHints(p, available, reusable, requested)
	}
	return hints
}

// PodTopologyHints are the hints of the pod's devices as a whole (its
// effective limits: the largest init container's, or the app containers'
// and sidecars' together), for the pod scope.
func (m *Manager) PodTopologyHints(pod *v1.Pod) map[string][]topologymanager.Hint {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.freeInactiveAndSave(string(pod.UID))
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})
	hints := map[string][]topologymanager.Hint{}
	for _, res := range m.deviceResources(limits) {
		q := limits[v1.ResourceName(res)]
		requested := int(q.Value())
		p := m.plugins[res]
		if p == nil || !p.hasTopology() {
			hints[res] = nil
			continue
		}
		allocated := sets.New[string]()
		for _, rs := range m.allocated[string(pod.UID)] {
			if al := rs[res]; al != nil {
				allocated.Insert(al.ids...)
			}
		}
		if allocated.Len() > 0 {
			if allocated.Len() != requested {
				hints[res] = []topologymanager.Hint{}
				continue
			}
			hints[res] = m.deviceHints(p, allocated, nil, requested)
			continue
		}
		available := sets.New(p.healthy()...).Difference(m.allocated.inUse(res))
		if available.Len() < requested {
			hints[res] = []topologymanager.Hint{}
			continue
		}
		hints[res] = m.deviceHints(p, available, nil, requested)
	}
	return hints
}

// AllocateAligned is Allocate with the topology manager's NUMA affinity:
// devices on those nodes are taken first.
func (m *Manager) AllocateAligned(pod *v1.Pod, c *v1.Container, hint topologymanager.Hint) error {
	return m.allocate(pod, c, isInitContainer(pod, c), hint.Affinity)
}

// freeInactiveAndSave is freeInactive, the checkpoint written when it freed
// anything (caller holds mu).
func (m *Manager) freeInactiveAndSave(keep string) {
	if m.freeInactive(keep) {
		if err := m.writeCheckpoint(); err != nil {
			m.logger.Error("Write the device checkpoint", zap.Error(err))
		}
	}
}

// deviceResources lists the device plugin resources of limits, sorted
// (caller holds mu).
func (m *Manager) deviceResources(limits v1.ResourceList) []string {
	var out []string
	for name := range limits {
		if m.known[string(name)] {
			out = append(out, string(name))
		}
	}
	sort.Strings(out)
	return out
}

// hasTopology says whether any device of the plugin reports NUMA nodes.
func (p *plugin) hasTopology() bool {
	for _, d := range p.devices {
		if len(numaNodesOf(d)) > 0 {
			return true
		}
	}
	return false
}

func numaNodesOf(d *pluginapi.Device) []int {
	var out []int
	for _, n := range d.GetTopology().GetNodes() {
		out = append(out, int(n.GetID()))
	}
	return out
}

// deviceHints generates the hints of upstream's device manager over the
// NUMA nodes of the plugin's devices (every device, healthy or not):
// devices without topology never count, a device on several nodes counts
// for a mask holding any of them; every reusable device with topology must
// be in the mask.
func (m *Manager) deviceHints(p *plugin, available, reusable sets.Set[string], request int) []topologymanager.Hint {
	nodeSet := sets.New[int]()
	for _, d := range p.devices {
		nodeSet.Insert(numaNodesOf(d)...)
	}
	if len(m.numaNodes) > 0 {
		if known := nodeSet.Intersection(sets.New(m.numaNodes...)); known.Len() > 0 {
			nodeSet = known
		} else {
			nodeSet = sets.New(m.numaNodes...)
		}
	}
	nodes := sets.List(nodeSet)
	in := func(mask topologymanager.Mask, d *pluginapi.Device) bool {
		return slices.ContainsFunc(numaNodesOf(d), mask.Has)
	}
	minSize := len(nodes)
	hints := []topologymanager.Hint{}
	topologymanager.EachMask(nodes, func(mask topologymanager.Mask) {
		capacity := 0
		for _, d := range p.devices {
			if in(mask, d) {
				capacity++
			}
		}
		if capacity >= request && mask.Count() < minSize {
			minSize = mask.Count()
		}
		n := 0
		for id := range reusable {
			d := p.devices[id]
			if d == nil || d.Topology == nil {
				continue
			}
			if !in(mask, d) {
				return
			}
			n++
		}
		for id := range available {
			if d := p.devices[id]; d != nil && in(mask, d) {
				n++
			}
		}
		if n >= request {
			hints = append(hints, topologymanager.Hint{Affinity: mask})
		}
	})
	for i := range hints {
		hints[i].Preferred = hints[i].Affinity.Count() == minSize
	}
	return hints
}

// byAffinity splits devices into those on the NUMA nodes of affinity,
// those on other nodes and those without topology, each sorted.
func byAffinity(p *plugin, ids sets.Set[string], affinity topologymanager.Mask) (aligned, unaligned, none []string) {
	for _, id := range sets.List(ids) {
		nodes := numaNodesOf(p.devices[id])
		switch {
		case len(nodes) == 0:
			none = append(none, id)
		case slices.ContainsFunc(nodes, affinity.Has):
			aligned = append(aligned, id)
		default:
			unaligned = append(unaligned, id)
		}
	}
	return aligned, unaligned, none
}

func isInitContainer(pod *v1.Pod, c *v1.Container) bool {
	for i := range pod.Spec.InitContainers {
		if &pod.Spec.InitContainers[i] == c || pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}
