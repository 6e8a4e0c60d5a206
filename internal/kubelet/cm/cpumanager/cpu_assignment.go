package cpumanager

import (
	"fmt"
	"slices"

	"k8s.io/utils/cpuset"
)

// takeByTopology picks numCPUs CPUs out of available the way upstream's
// takeByTopologyNUMAPacked does with the default policy options (packed
// sorting, no uncore-cache alignment):
//
//  1. whole NUMA nodes and whole sockets, larger level first, when the request
//     needs at least that many CPUs;
//  2. whole cores when it needs at least a core's worth;
//  3. single threads, filling partly used cores first.
//
// At every level the candidates are sorted by how few of their CPUs are still
// free (ties by ID), so allocations pack onto what is already used.
func takeByTopology(topo *Topology, available cpuset.CPUSet, numCPUs int) (cpuset.CPUSet, error) {
	acc := newAccumulator(topo, available, numCPUs)
	if acc.satisfied() {
		return acc.result, nil
	}
	if acc.failed() {
		return cpuset.New(), fmt.Errorf("not enough cpus available to satisfy request: requested=%d, available=%d",
			numCPUs, available.Size())
	}
	steps := []func(){acc.takeFullNUMANodes, acc.takeFullSockets}
	if !acc.numaFirst {
		steps = []func(){acc.takeFullSockets, acc.takeFullNUMANodes}
	}
	steps = append(steps, acc.takeFullCores, acc.takeRemainingCPUs)
	for _, step := range steps {
		step()
		if acc.satisfied() {
			return acc.result, nil
		}
	}
	return cpuset.New(), fmt.Errorf("failed to allocate cpus")
}

// accumulator collects CPUs for one takeByTopology call. details holds the
// CPUs still free; topo is never changed.
type accumulator struct {
	topo    *Topology
	details CPUDetails
	needed  int
	result  cpuset.CPUSet
	// numaFirst is true when NUMA nodes are at least as large as sockets
	// (a NUMA node spans one socket or more), so NUMA nodes are the first
	// level of the hierarchy.
	numaFirst bool
}

func newAccumulator(topo *Topology, available cpuset.CPUSet, numCPUs int) *accumulator {
	return &accumulator{
		topo:      topo,
		details:   topo.CPUDetails.KeepOnly(available),
		needed:    numCPUs,
		result:    cpuset.New(),
		numaFirst: topo.NumSockets >= topo.NumNUMANodes,
	}
}

func (a *accumulator) satisfied() bool         { return a.needed < 1 }
func (a *accumulator) failed() bool            { return a.needed > len(a.details) }
func (a *accumulator) needsAtLeast(n int) bool { return a.needed >= n }

func (a *accumulator) take(cpus cpuset.CPUSet) {
	a.result = a.result.Union(cpus)
	a.details = a.details.KeepOnly(a.details.CPUs().Difference(a.result))
	a.needed -= cpus.Size()
}

// sortByFree orders ids by the number of free CPUs in each (fewest first),
// then by ID.
func (a *accumulator) sortByFree(ids []int, free func(ids ...int) cpuset.CPUSet) []int {
	slices.SortFunc(ids, func(x, y int) int {
		if d := free(x).Size() - free(y).Size(); d != 0 {
			return d
		}
		return x - y
	})
	return ids
}

func (a *accumulator) sortedNUMANodes() []int {
	if a.numaFirst {
		return a.sortByFree(a.details.NUMANodes().List(), a.details.CPUsInNUMANodes)
	}
	var out []int
	for _, socket := range a.sortedSockets() {
		out = append(out, a.sortByFree(a.details.NUMANodesInSockets(socket).List(), a.details.CPUsInNUMANodes)...)
	}
	return out
}

func (a *accumulator) sortedSockets() []int {
	if !a.numaFirst {
		return a.sortByFree(a.details.Sockets().List(), a.details.CPUsInSockets)
	}
	var out []int
	for _, node := range a.sortedNUMANodes() {
		out = append(out, a.sortByFree(a.details.SocketsInNUMANodes(node).List(), a.details.CPUsInSockets)...)
	}
	return out
}

func (a *accumulator) sortedCores() []int {
	var out []int
	if a.numaFirst {
		for _, socket := range a.sortedSockets() {
			out = append(out, a.sortByFree(a.details.CoresInSockets(socket).List(), a.details.CPUsInCores)...)
		}
		return out
	}
	for _, node := range a.sortedNUMANodes() {
		out = append(out, a.sortByFree(a.details.CoresInNUMANodes(node).List(), a.details.CPUsInCores)...)
	}
	return out
}

// sortedCPUs lists the free CPUs core by core in sortedCores order, each
// core's CPUs by ID.
func (a *accumulator) sortedCPUs() []int {
	var out []int
	for _, core := range a.sortedCores() {
		out = append(out, a.details.CPUsInCores(core).List()...)
	}
	return out
}

func (a *accumulator) takeFullNUMANodes() {
	for _, node := range a.sortedNUMANodes() {
		all := a.topo.CPUDetails.CPUsInNUMANodes(node)
		if a.details.CPUsInNUMANodes(node).Size() != all.Size() || !a.needsAtLeast(all.Size()) {
			continue
		}
		a.take(all)
	}
}

func (a *accumulator) takeFullSockets() {
	for _, socket := range a.sortedSockets() {
		all := a.topo.CPUDetails.CPUsInSockets(socket)
		if a.details.CPUsInSockets(socket).Size() != a.topo.CPUsPerSocket() || !a.needsAtLeast(all.Size()) {
			continue
		}
		a.take(all)
	}
}

func (a *accumulator) takeFullCores() {
	for _, core := range a.sortedCores() {
		all := a.topo.CPUDetails.CPUsInCores(core)
		if a.details.CPUsInCores(core).Size() != a.topo.CPUsPerCore() || !a.needsAtLeast(all.Size()) {
			continue
		}
		a.take(all)
	}
}

func (a *accumulator) takeRemainingCPUs() {
	for _, cpu := range a.sortedCPUs() {
		a.take(cpuset.New(cpu))
		if a.satisfied() {
			return
		}
	}
}
