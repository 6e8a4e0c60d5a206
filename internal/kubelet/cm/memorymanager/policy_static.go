package memorymanager

import (
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/memorymanager/state"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// staticPolicy is upstream's Static policy. Its methods work on the
// Manager's state under the Manager's mutex.
type staticPolicy struct {
	nodes    []NUMANode
	reserved reservedByNode
	// reusable is the memory of the current pod's regular init containers
	// that its later containers reuse, by NUMA nodes and resource (as
	// upstream, only the pod being admitted is kept).
	reusable map[string]map[topologymanager.Mask]map[v1.ResourceName]uint64
}

func newStaticPolicy(nodes []NUMANode, reserved reservedByNode) (*staticPolicy, error) {
	var total uint64
	for _, r := range reserved {
		total += r[v1.ResourceMemory]
	}
	if total == 0 {
		return nil, errors.New("[memorymanager] you should specify the system reserved memory")
	}
	return &staticPolicy{nodes: nodes, reserved: reserved, reusable: map[string]map[topologymanager.Mask]map[v1.ResourceName]uint64{}}, nil
}

// defaultMachine is the machine state with nothing allocated: per node, each
// huge page pool (its pages less reservedMemory) and memory (MemTotal less
// reservedMemory and the huge pages).
func (p *staticPolicy) defaultMachine() state.NUMANodeMap {
	out := state.NUMANodeMap{}
	for _, n := range p.nodes {
		ns := &state.NUMANodeState{MemoryMap: map[v1.ResourceName]*state.MemoryTable{}, Cells: []int{n.ID}}
		var huge uint64
		for _, hp := range n.HugePages {
			name := resources.HugePagesName(int64(hp.PageSizeKiB) * 1024)
			total := hp.Pages * hp.PageSizeKiB * 1024
			reserved := p.reserved[n.ID][name]
			ns.MemoryMap[name] = &state.MemoryTable{TotalMemSize: total, SystemReserved: reserved, Allocatable: total - reserved, Free: total - reserved}
			huge += total
		}
		reserved := p.reserved[n.ID][v1.ResourceMemory]
		alloc := n.MemoryBytes - reserved - huge
		ns.MemoryMap[v1.ResourceMemory] = &state.MemoryTable{TotalMemSize: n.MemoryBytes, SystemReserved: reserved, Allocatable: alloc, Free: alloc}
		out[n.ID] = ns
	}
	return out
}

// validateState fills an empty machine state (initialized: it did), or
// checks a restored one against what its assignments give on this machine.
func (p *staticPolicy) validateState(st *state.State) (initialized bool, err error) {
	if len(st.Machine) == 0 {
		if len(st.Assignments) != 0 {
			return false, errors.New("[memorymanager] machine state can not be empty when it has memory assignments")
		}
		st.Machine = p.defaultMachine()
		return true, nil
	}
	expected := p.defaultMachine()
	for pod, containers := range st.Assignments {
		for name, blocks := range containers {
			for _, b := range blocks {
				for _, id := range b.NUMAAffinity {
					ns, ok := expected[id]
					if !ok {
						return false, fmt.Errorf("[memorymanager] (pod: %s, container: %s) the memory assignment uses the NUMA that does not exist", pod, name)
					}
					if _, ok := ns.MemoryMap[b.Type]; !ok {
						return false, fmt.Errorf("[memorymanager] (pod: %s, container: %s) the memory assignment uses memory resource that does not exist", pod, name)
					}
				}
				reserve(expected, b.NUMAAffinity, b.Type, b.Size)
			}
		}
	}
	if !machinesEqual(st.Machine, expected) {
		return false, errors.New("[memorymanager] the expected machine state is different from the real one")
	}
	return false, nil
}

// machinesEqual is upstream's comparison: the same nodes, assignment counts,
// groups, totals, reservations and allocatables, and per group the same
// free and reserved sums.
func machinesEqual(a, b state.NUMANodeMap) bool {
	if len(a) != len(b) {
		return false
	}
	for id, na := range a {
		nb, ok := b[id]
		if !ok || na == nil || nb == nil || na.NumberOfAssignments != nb.NumberOfAssignments ||
			!sameGroup(na.Cells, nb.Cells) || len(na.MemoryMap) != len(nb.MemoryMap) {
			return false
		}
		for name, ta := range na.MemoryMap {
			tb, ok := nb.MemoryMap[name]
			if !ok || ta.TotalMemSize != tb.TotalMemSize || ta.SystemReserved != tb.SystemReserved || ta.Allocatable != tb.Allocatable {
				return false
			}
			var sa, sb state.MemoryTable
			for _, cell := range na.Cells {
				ca, cb := table(a, cell, name), table(b, cell, name)
				sa.Free, sa.Reserved = sa.Free+ca.Free, sa.Reserved+ca.Reserved
				sb.Free, sb.Reserved = sb.Free+cb.Free, sb.Reserved+cb.Reserved
			}
			if sa.Free != sb.Free || sa.Reserved != sb.Reserved {
				return false
			}
		}
	}
	return true
}

// table is a node's table of a resource (zero when it has none).
func table(m state.NUMANodeMap, id int, name v1.ResourceName) state.MemoryTable {
	if ns := m[id]; ns != nil && ns.MemoryMap[name] != nil {
		return *ns.MemoryMap[name]
	}
	return state.MemoryTable{}
}

// sameGroup compares two node groups as sets in order.
func sameGroup(a, b []int) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// hints lists, for every set of NUMA nodes, a hint for each requested
// resource when the nodes' allocatable holds the request, the set does not
// mix single- and cross-NUMA use (a node used alone is offered alone, a
// node of a group only with exactly its group), and the free memory plus
// what the pod's init containers leave to reuse holds it. Preferred are the
// hints as narrow as the narrowest set whose allocatable holds the request.
func (p *staticPolicy) hints(machine state.NUMANodeMap, podUID string, req map[v1.ResourceName]uint64) map[string][]topologymanager.Hint {
	nodes := machine.NUMANodes()
	narrowest := len(nodes)
	out := map[string][]topologymanager.Hint{}
	topologymanager.EachMask(nodes, func(mask topologymanager.Mask) {
		ids := mask.Nodes()
		single := len(ids) == 1
		for name, size := range req {
			var alloc uint64
			for _, id := range ids {
				alloc += table(machine, id, name).Allocatable
			}
			if alloc < size {
				return
			}
		}
		narrowest = min(narrowest, mask.Count())
		if single && len(machine[ids[0]].Cells) > 1 {
			return
		}
		for _, id := range ids {
			if ns := machine[id]; !single && ns.NumberOfAssignments > 0 && (len(ns.Cells) == 1 || !sameGroup(ns.Cells, ids)) {
				return
			}
		}
		for name, size := range req {
			var free uint64
			for _, id := range ids {
				free += table(machine, id, name).Free
			}
			if free+p.reusableOf(podUID, mask, name) < size {
				return
			}
		}
		for name := range req {
			out[string(name)] = append(out[string(name)], topologymanager.Hint{Affinity: mask})
		}
	})
	for name := range out {
		for i := range out[name] {
			out[name][i].Preferred = out[name][i].Affinity.Count() == narrowest
		}
	}
	return out
}

// regenerateHints are the hints of a container that has its blocks already:
// their nodes, preferred, when they match the request (nil otherwise).
func regenerateHints(blocks []state.Block, req map[v1.ResourceName]uint64) map[string][]topologymanager.Hint {
	if len(blocks) != len(req) {
		return nil
	}
	out := map[string][]topologymanager.Hint{}
	for name := range req {
		out[string(name)] = []topologymanager.Hint{}
	}
	for _, b := range blocks {
		size, ok := req[b.Type]
		if !ok || size != b.Size {
			return nil
		}
		mask, err := topologymanager.NewMask(b.NUMAAffinity...)
		if err != nil {
			return nil
		}
		out[string(b.Type)] = append(out[string(b.Type)], topologymanager.Hint{Affinity: mask, Preferred: true})
	}
	return out
}

// allocate pins the container's request on the hint's nodes: with no
// affinity (topology manager policy none), the best of the policy's own
// hints; nodes that do not hold the request are widened to the best hint
// containing them; a set that would mix single- and cross-NUMA use is
// refused. Upstream's errors, in upstream's order.
func (p *staticPolicy) allocate(st state.State, pod *v1.Pod, c *v1.Container, req map[v1.ResourceName]uint64, hint topologymanager.Hint) error {
	uid := string(pod.UID)
	best := hint
	if hint.Affinity == 0 {
		hints := p.hints(st.Machine, uid, req)
		if len(hints) == 0 {
			return errors.New("[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available")
		}
		def := bestHint(hints[string(v1.ResourceMemory)])
		if !def.Preferred && best.Preferred {
			return errors.New("[memorymanager] failed to find the default preferred hint")
		}
		best = def
	}
	if !holds(st.Machine, best.Affinity, req) {
		var within []topologymanager.Hint
		for _, h := range p.hints(st.Machine, uid, req)[string(v1.ResourceMemory)] {
			if h.Affinity&best.Affinity == best.Affinity {
				within = append(within, h)
			}
		}
		if len(within) == 0 {
			return errors.New("[memorymanager] failed to find NUMA nodes to extend the current topology hint")
		}
		ext := bestHint(within)
		if !ext.Preferred && best.Preferred {
			return errors.New("[memorymanager] failed to find the extended preferred hint")
		}
		best = ext
	}
	if mixesSingleAndCross(st.Machine, best.Affinity) {
		return errors.New("[memorymanager] preferred hint violates NUMA node allocation")
	}
	ids := best.Affinity.Nodes()
	names := make([]v1.ResourceName, 0, len(req))
	for name := range req {
		names = append(names, name)
	}
	slices.Sort(names)
	blocks := make([]state.Block, 0, len(req))
	for _, name := range names {
		blocks = append(blocks, state.Block{NUMAAffinity: slices.Clone(ids), Type: name, Size: req[name]})
		size := req[name]
		size -= min(size, p.reusableOf(uid, best.Affinity, name))
		reserve(st.Machine, ids, name, size)
	}
	p.noteReusable(pod, c, blocks)
	st.SetBlocks(uid, c.Name, blocks)
	p.reuseInitBlocks(st, pod, c, blocks)
	return nil
}

// bestHint is upstream's findBestHint: preferred first, then narrowest.
func bestHint(hints []topologymanager.Hint) topologymanager.Hint {
	var best topologymanager.Hint
	for _, h := range hints {
		switch {
		case best.Affinity == 0,
			h.Preferred && !best.Preferred,
			h.Preferred == best.Preferred && h.Affinity.NarrowerThan(best.Affinity):
			best = h
		}
	}
	return best
}

// holds says whether the nodes' free memory holds the request.
func holds(machine state.NUMANodeMap, mask topologymanager.Mask, req map[v1.ResourceName]uint64) bool {
	for name, size := range req {
		var free uint64
		for _, id := range mask.Nodes() {
			free += table(machine, id, name).Free
		}
		if free < size {
			return false
		}
	}
	return true
}

// mixesSingleAndCross says whether allocating on mask would use a node both
// alone and in a group, or in two different groups.
func mixesSingleAndCross(machine state.NUMANodeMap, mask topologymanager.Mask) bool {
	ids := mask.Nodes()
	if len(ids) == 1 {
		return false
	}
	for _, id := range ids {
		ns := machine[id]
		if ns == nil || ns.NumberOfAssignments == 0 {
			continue
		}
		if len(ns.Cells) == 1 || !sameGroup(ns.Cells, ids) {
			return true
		}
	}
	return false
}

// reserve counts a block on its nodes and takes size of name from their
// free memory, node after node.
func reserve(machine state.NUMANodeMap, ids []int, name v1.ResourceName, size uint64) {
	for _, id := range ids {
		ns := machine[id]
		if ns == nil {
			continue
		}
		ns.NumberOfAssignments++
		ns.Cells = slices.Clone(ids)
		t := ns.MemoryMap[name]
		if size == 0 || t == nil || t.Free == 0 {
			continue
		}
		take := min(size, t.Free)
		t.Reserved += take
		t.Free -= take
		size -= take
	}
}

// release frees a container's blocks (its assignment forgotten) and says
// whether it had any.
func (p *staticPolicy) release(st state.State, podUID, container string) bool {
	blocks := st.Blocks(podUID, container)
	if blocks == nil {
		return false
	}
	st.Delete(podUID, container)
	for _, b := range blocks {
		size := b.Size
		for _, id := range b.NUMAAffinity {
			ns := st.Machine[id]
			if ns == nil {
				continue
			}
			ns.NumberOfAssignments--
			if ns.NumberOfAssignments == 0 {
				ns.Cells = []int{id}
			}
			t := ns.MemoryMap[b.Type]
			if size == 0 || t == nil || t.Reserved == 0 {
				continue
			}
			give := min(size, t.Reserved)
			t.Free += give
			t.Reserved -= give
			size -= give
		}
	}
	return true
}

// forgetPod drops the pod's reusable init container memory.
func (p *staticPolicy) forgetPod(podUID string) { delete(p.reusable, podUID) }

func (p *staticPolicy) reusableOf(podUID string, mask topologymanager.Mask, name v1.ResourceName) uint64 {
	return p.reusable[podUID][mask][name]
}

// noteReusable records a regular init container's blocks as reusable by the
// containers after it (the largest per nodes and resource), or takes an
// app container's blocks from what is reusable. Other pods' records go.
func (p *staticPolicy) noteReusable(pod *v1.Pod, c *v1.Container, blocks []state.Block) {
	uid := string(pod.UID)
	for other := range p.reusable {
		if other != uid {
			delete(p.reusable, other)
		}
	}
	regularInit := false
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			regularInit = !kubecontainer.IsSidecar(&pod.Spec.InitContainers[i])
			break
		}
	}
	for _, b := range blocks {
		mask, _ := topologymanager.NewMask(b.NUMAAffinity...)
		if regularInit {
			if p.reusable[uid] == nil {
				p.reusable[uid] = map[topologymanager.Mask]map[v1.ResourceName]uint64{}
			}
			if p.reusable[uid][mask] == nil {
				p.reusable[uid][mask] = map[v1.ResourceName]uint64{}
			}
			p.reusable[uid][mask][b.Type] = max(p.reusable[uid][mask][b.Type], b.Size)
			continue
		}
		if r := p.reusableOf(uid, mask, b.Type); r != 0 {
			p.reusable[uid][mask][b.Type] = r - min(r, b.Size)
		}
	}
}

// reuseInitBlocks shrinks the blocks of the regular init containers before c
// by what c reused of them (same nodes and resource), so that the pod's
// blocks add up to what it holds.
func (p *staticPolicy) reuseInitBlocks(st state.State, pod *v1.Pod, c *v1.Container, blocks []state.Block) {
	uid := string(pod.UID)
	for _, b := range blocks {
		size := b.Size
		for i := range pod.Spec.InitContainers {
			init := &pod.Spec.InitContainers[i]
			if init.Name == c.Name || size == 0 {
				break
			}
			if kubecontainer.IsSidecar(init) {
				continue
			}
			initBlocks := st.Blocks(uid, init.Name)
			for j := range initBlocks {
				ib := &initBlocks[j]
				if ib.Size == 0 || ib.Type != b.Type || !sameGroup(ib.NUMAAffinity, b.NUMAAffinity) {
					continue
				}
				take := min(size, ib.Size)
				ib.Size -= take
				size -= take
			}
		}
	}
}

// isPinned says whether the pod's memory is pinned: a Guaranteed pod
// without pod-level resources.
func isPinned(pod *v1.Pod) bool {
	return kubecontainer.GetPodQOS(pod) == v1.PodQOSGuaranteed && !resourcehelper.IsPodLevelResourcesSet(pod)
}

// containerRequests are a container's memory and huge page requests.
func containerRequests(c *v1.Container) (map[v1.ResourceName]uint64, error) {
	out := map[v1.ResourceName]uint64{}
	for name, q := range c.Resources.Requests {
		if name != v1.ResourceMemory && !resources.IsHugePages(name) {
			continue
		}
		v, ok := q.AsInt64()
		if !ok {
			return nil, errors.New("[memorymanager] failed to represent quantity as int64")
		}
		out[name] = uint64(v)
	}
	return out, nil
}

// podRequests are the pod's memory and huge page requests as upstream sums
// them for pod scope: the app containers and sidecars together, or the
// largest regular init container (with the sidecars started before it) if
// more.
func podRequests(pod *v1.Pod) (map[v1.ResourceName]uint64, error) {
	initMax, sidecars := map[v1.ResourceName]uint64{}, map[v1.ResourceName]uint64{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req, err := containerRequests(c)
		if err != nil {
			return nil, err
		}
		for name, size := range req {
			if kubecontainer.IsSidecar(c) {
				sidecars[name] += size
			} else {
				initMax[name] = max(initMax[name], sidecars[name]+size)
			}
		}
	}
	apps := map[v1.ResourceName]uint64{}
	for i := range pod.Spec.Containers {
		req, err := containerRequests(&pod.Spec.Containers[i])
		if err != nil {
			return nil, err
		}
		for name, size := range req {
			apps[name] += size
		}
	}
	out := map[v1.ResourceName]uint64{}
	for name, size := range apps {
		out[name] = max(size+sidecars[name], initMax[name])
	}
	return out, nil
}
