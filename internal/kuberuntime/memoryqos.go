package kuberuntime

import (
	"math"
	"strconv"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// MemoryQoS is how containers get cgroup v2 memory protection and throttling
// (upstream's MemoryQoS gate; the runtime writes the Unified keys into the
// container's cgroup).
type MemoryQoS struct {
	// CgroupV2 is true on a cgroup v2 node; on v1 nothing is set.
	CgroupV2 bool
	// Enabled is the MemoryQoS gate.
	Enabled bool
	// ThrottlingFactor is memoryThrottlingFactor (0.9 by default).
	ThrottlingFactor float64
	// AllocatableMemory is the node's memory less systemReserved and
	// kubeReserved (upstream's absolute node allocatable): memory.high of a
	// container without a memory limit is taken from it.
	AllocatableMemory int64
}

// Unified cgroup v2 keys the kubelet sets for MemoryQoS.
const (
	cgroup2MemoryMin  = cgroups.MemoryMin
	cgroup2MemoryLow  = cgroups.MemoryLow
	cgroup2MemoryHigh = cgroups.MemoryHigh
)

// memoryQoSPageSize is the page memory.high is rounded down to (upstream
// uses the fixed 4096 of x86 and arm64's default).
const memoryQoSPageSize = 4096

// unified is what upstream's generateLinuxContainerResources puts in a
// container's Unified resources, with memoryReservationPolicy None (its
// default; TieredReservation is not honoured here):
//   - MemoryQoS on: memory.min and memory.low 0, and memory.high =
//     floor((request + factor*(limit - request)) / page) * page for a
//     container whose memory request differs from its limit or is 0, the
//     limit being the node's allocatable memory when the container has none
//     (and no memory.high when a pod-level memory limit throttles the pod
//     instead, or when it would not exceed the request);
//   - MemoryQoS off: memory.high "max", so that a resize clears a throttle
//     set while it was on.
//
// nil on cgroup v1.
func (q MemoryQoS) unified(pod *v1.Pod, c *v1.Container) map[string]string {
	if !q.CgroupV2 {
		return nil
	}
	if !q.Enabled {
		return map[string]string{cgroup2MemoryHigh: "max"}
	}
	out := map[string]string{cgroup2MemoryMin: "0", cgroup2MemoryLow: "0"}
	request := c.Resources.Requests.Memory().Value()
	limit := c.Resources.Limits.Memory().Value()
	skipHigh := limit == 0 && resourcehelper.IsPodLevelResourcesSet(pod) &&
		pod.Spec.Resources != nil && !pod.Spec.Resources.Limits.Memory().IsZero()
	if skipHigh || (request == limit && request != 0) {
		return out
	}
	ceiling := limit
	if ceiling == 0 {
		ceiling = q.AllocatableMemory
	}
	if ceiling <= 0 {
		return out
	}
	high := int64(math.Floor((float64(request)+float64(ceiling-request)*q.ThrottlingFactor)/memoryQoSPageSize)) * memoryQoSPageSize
	if high != 0 && high > request {
		out[cgroup2MemoryHigh] = strconv.FormatInt(high, 10)
	}
	return out
}
