package eviction

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// The internal resource names of the inode and pid signals (upstream's).
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// signalResource is the resource each signal starves (upstream's
// signalToResource); its keys are the valid signals.
var signalResource = map[string]v1.ResourceName{
	resources.SignalMemoryAvailable:            v1.ResourceMemory,
	resources.SignalAllocatableMemoryAvailable: v1.ResourceMemory,
	resources.SignalNodeFsAvailable:            v1.ResourceEphemeralStorage,
	resources.SignalNodeFsInodesFree:           resourceInodes,
	resources.SignalImageFsAvailable:           v1.ResourceEphemeralStorage,
	resources.SignalImageFsInodesFree:          resourceInodes,
	resources.SignalContainerFsAvailable:       v1.ResourceEphemeralStorage,
	resources.SignalContainerFsInodesFree:      resourceInodes,
	resources.SignalPIDAvailable:               resourcePIDs,
}

// signalCondition is the node condition each signal drives.
func signalCondition(signal string) v1.NodeConditionType {
	switch signalResource[signal] {
	case v1.ResourceMemory:
		return v1.NodeMemoryPressure
	case resourcePIDs:
		return v1.NodePIDPressure
	}
	return v1.NodeDiskPressure
}

// observation is one signal's sample: what is available out of capacity, at
// time.
type observation struct {
	available, capacity int64
	format              resource.Format
	time                time.Time
}

func (o observation) availableQuantity() *resource.Quantity {
	return resource.NewQuantity(o.available, o.format)
}

// observations maps signals to their samples.
type observations map[string]observation

// makeObservations reads the signals from the node's stats, as upstream's
// makeSignalObservations: memory.available is the node's available memory
// (capacity - working set) less hugePages, allocatableMemory.available the
// pods cgroup's, the fs signals the root dir's and the runtime's image
// filesystems, pid.available the pids left.
func makeObservations(node *statsapi.NodeStats, hugePages int64) observations {
	obs := observations{}
	if m := node.Memory; m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		avail := max(int64(*m.AvailableBytes)-hugePages, 0)
		obs[resources.SignalMemoryAvailable] = observation{available: avail,
			capacity: avail + int64(*m.WorkingSetBytes), format: resource.BinarySI, time: m.Time.Time}
	}
	if m := podsMemory(node); m != nil && m.AvailableBytes != nil && m.WorkingSetBytes != nil {
		obs[resources.SignalAllocatableMemoryAvailable] = observation{available: int64(*m.AvailableBytes),
			capacity: int64(*m.AvailableBytes + *m.WorkingSetBytes), format: resource.BinarySI, time: m.Time.Time}
	}
	addFs(obs, node.Fs, resources.SignalNodeFsAvailable, resources.SignalNodeFsInodesFree)
	if rt := node.Runtime; rt != nil {
		addFs(obs, rt.ImageFs, resources.SignalImageFsAvailable, resources.SignalImageFsInodesFree)
		addFs(obs, rt.ContainerFs, resources.SignalContainerFsAvailable, resources.SignalContainerFsInodesFree)
	}
	if r := node.Rlimit; r != nil && r.MaxPID != nil && r.NumOfRunningProcesses != nil {
		obs[resources.SignalPIDAvailable] = observation{available: *r.MaxPID - *r.NumOfRunningProcesses,
			capacity: *r.MaxPID, format: resource.DecimalSI, time: r.Time.Time}
	}
	return obs
}

func addFs(obs observations, fs *statsapi.FsStats, bytesSignal, inodesSignal string) {
	if fs == nil {
		return
	}
	if fs.AvailableBytes != nil && fs.CapacityBytes != nil {
		obs[bytesSignal] = observation{available: int64(*fs.AvailableBytes), capacity: int64(*fs.CapacityBytes),
			format: resource.BinarySI, time: fs.Time.Time}
	}
	if fs.InodesFree != nil && fs.Inodes != nil {
		obs[inodesSignal] = observation{available: int64(*fs.InodesFree), capacity: int64(*fs.Inodes),
			format: resource.DecimalSI, time: fs.Time.Time}
	}
}

// podsMemory is the memory of the "pods" system container (the
// node-allocatable cgroup), or nil.
func podsMemory(node *statsapi.NodeStats) *statsapi.MemoryStats {
	for _, sc := range node.SystemContainers {
		if sc.Name == statsapi.SystemContainerPods {
			return sc.Memory
		}
	}
	return nil
}
