package resources

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Machine is what the node's capacity and nodeInfo are made of. It is read
// once, at start (ReadMachine).
type Machine struct {
	// NumCPU is the number of online processors.
	NumCPU int
	// MemoryCapacity is MemTotal, in bytes.
	MemoryCapacity int64
	// SwapCapacity is SwapTotal, in bytes (0: no swap).
	SwapCapacity int64
	// HugePages maps a page size to the total bytes of its preallocated pages.
	HugePages map[int64]int64
	// RootFsCapacity is the size of the filesystem holding the kubelet's root
	// directory (ephemeral-storage), in bytes; 0 when unknown.
	RootFsCapacity int64
	// The identifiers of nodeInfo; empty when unreadable.
	KernelVersion, OSImage, MachineID, SystemUUID, BootID string
}

// Filesystem is one statfs(2) sample of a filesystem.
type Filesystem struct {
	Capacity, Available int64 // bytes
	Inodes, InodesFree  int64
}

// capacity is the machine's part of the node capacity: cpu, memory, pods,
// ephemeral-storage (when known) and hugepages-<size> per page size.
func (m Machine) capacity(maxPods int) v1.ResourceList {
	out := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(int64(m.NumCPU)*1000, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(m.MemoryCapacity, resource.BinarySI),
		v1.ResourcePods:   *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	if m.RootFsCapacity > 0 {
		out[v1.ResourceEphemeralStorage] = *resource.NewQuantity(m.RootFsCapacity, resource.BinarySI)
	}
	for size, total := range m.HugePages {
		out[HugePagesName(size)] = *resource.NewQuantity(total, resource.BinarySI)
	}
	return out
}

// HugePagesName is the resource name of a huge page size, e.g. hugepages-2Mi.
func HugePagesName(pageSize int64) v1.ResourceName {
	return v1.ResourceName(v1.ResourceHugePagesPrefix + resource.NewQuantity(pageSize, resource.BinarySI).String())
}
