// Package state is the memory manager's state and its checkpoint file,
// memory_manager_state, in upstream kubelet 1.37's format. The type and field
// names are upstream's on purpose: the file's legacy checksum is taken over
// the text go-spew prints for these values, type names included.
package state

import (
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// MemoryTable is one memory resource (memory or hugepages-<size>) of one
// NUMA node, in bytes.
type MemoryTable struct {
	TotalMemSize   uint64 `json:"total"`
	SystemReserved uint64 `json:"systemReserved"`
	Allocatable    uint64 `json:"allocatable"`
	Reserved       uint64 `json:"reserved"`
	Free           uint64 `json:"free"`
}

// NUMANodeState is one NUMA node: how many blocks use it, its memory
// resources, and the group of nodes it is allocated with (Cells: itself
// alone, or every node of a cross-NUMA allocation it takes part in).
type NUMANodeState struct {
	NumberOfAssignments int                              `json:"numberOfAssignments"`
	MemoryMap           map[v1.ResourceName]*MemoryTable `json:"memoryMap"`
	Cells               []int                            `json:"cells"`
}

// NUMANodeMap is the machine state: each NUMA node by ID.
type NUMANodeMap map[int]*NUMANodeState

// Clone returns a deep copy.
func (nm NUMANodeMap) Clone() NUMANodeMap {
	out := make(NUMANodeMap, len(nm))
	for id, s := range nm {
		if s == nil {
			out[id] = nil
			continue
		}
		c := &NUMANodeState{NumberOfAssignments: s.NumberOfAssignments, Cells: append([]int{}, s.Cells...)}
		if s.MemoryMap != nil {
			c.MemoryMap = make(map[v1.ResourceName]*MemoryTable, len(s.MemoryMap))
			for name, t := range s.MemoryMap {
				tc := *t
				c.MemoryMap[name] = &tc
			}
		}
		out[id] = c
	}
	return out
}

// Block is an amount of one memory resource given to a container on a set
// of NUMA nodes.
type Block struct {
	NUMAAffinity []int           `json:"numaAffinity"`
	Type         v1.ResourceName `json:"type"`
	Size         uint64          `json:"size"`
}

// ContainerMemoryAssignments are the containers' blocks by pod UID and
// container name.
type ContainerMemoryAssignments map[string]map[string][]Block

// Clone returns a deep copy.
func (as ContainerMemoryAssignments) Clone() ContainerMemoryAssignments {
	out := make(ContainerMemoryAssignments, len(as))
	for pod, containers := range as {
		out[pod] = make(map[string][]Block, len(containers))
		for name, blocks := range containers {
			out[pod][name] = CloneBlocks(blocks)
		}
	}
	return out
}

// CloneBlocks returns a deep copy (nil for nil).
func CloneBlocks(blocks []Block) []Block {
	if blocks == nil {
		return nil
	}
	out := make([]Block, len(blocks))
	for i, b := range blocks {
		out[i] = Block{NUMAAffinity: slices.Clone(b.NUMAAffinity), Type: b.Type, Size: b.Size}
	}
	return out
}

// PodEntry is a pod-level assignment (upstream's PodLevelResourceManagers,
// off by default): read to verify a checksum, never written.
type PodEntry struct {
	MemoryBlocks []Block `json:"memoryBlocks,omitempty"`
}

// PodMemoryAssignments are the pod-level assignments by pod UID.
type PodMemoryAssignments map[string]PodEntry

// State is what the memory manager keeps: the machine state and the
// containers' blocks.
type State struct {
	Machine     NUMANodeMap
	Assignments ContainerMemoryAssignments
}

// Clone returns a deep copy.
func (s State) Clone() State {
	return State{Machine: s.Machine.Clone(), Assignments: s.Assignments.Clone()}
}

// Blocks are a container's blocks (nil: none).
func (s State) Blocks(podUID, container string) []Block {
	return s.Assignments[podUID][container]
}

// SetBlocks records a container's blocks.
func (s State) SetBlocks(podUID, container string, blocks []Block) {
	if s.Assignments[podUID] == nil {
		s.Assignments[podUID] = map[string][]Block{}
	}
	s.Assignments[podUID][container] = blocks
}

// Delete forgets a container's blocks (and its pod once it has none).
func (s State) Delete(podUID, container string) {
	delete(s.Assignments[podUID], container)
	if len(s.Assignments[podUID]) == 0 {
		delete(s.Assignments, podUID)
	}
}

// NUMANodes are the machine state's node IDs, sorted.
func (nm NUMANodeMap) NUMANodes() []int {
	return slices.Sorted(maps.Keys(nm))
}
