package kuberuntime

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// Swap is how containers may use the machine's swap: upstream's memorySwap
// (swapBehavior NoSwap, the default, or LimitedSwap) with the NodeSwap gate,
// locked on in 1.37.
type Swap struct {
	// ControllerAvailable is upstream's test of swap accounting: the v1
	// memory root's memory.memsw.limit_in_bytes, or on cgroup v2 the
	// memory.swap.max of the kubelet's own cgroup. Without it nothing is set.
	ControllerAvailable bool
	// Limited is swapBehavior LimitedSwap.
	Limited bool
	// Capacity is the machine's swap (SwapTotal), shared out by LimitedSwap.
	Capacity int64
}

// configureSwap sets a container's swap as upstream's
// configureContainerSwapResources: with NoSwap, on cgroup v1 a memory+swap
// limit equal to the memory limit and on cgroup v2 memory.swap.max 0; with
// LimitedSwap (cgroup v2 only; a Burstable container whose memory request
// differs from its limit, not of a critical pod) memory.swap.max is its
// request's share of the machine's memory applied to the machine's swap.
func (m *Manager) configureSwap(pod *v1.Pod, c *v1.Container, r *runtimeapi.LinuxContainerResources) {
	if !m.swap.ControllerAvailable {
		return
	}
	if !m.memoryQoS.CgroupV2 {
		// memory+swap = memory: no swap beyond the limit (a container
		// without a memory limit is not limited either way).
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		return
	}
	swap := int64(0)
	if m.limitedSwap(pod, c) {
		if s, ok := swapShare(c.Resources.Requests.Memory().Value(), m.machineMemory, m.swap.Capacity); ok {
			swap = s
		} else {
			m.logger.Error("Cannot calculate swap allocation amount; disallowing swap")
		}
	}
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified[cgroups.MemorySwapMax] = strconv.FormatInt(swap, 10)
}

// limitedSwap reports whether container c gets LimitedSwap's share (upstream's
// GetContainerSwapBehavior); the caller checked cgroup v2 and the controller.
func (m *Manager) limitedSwap(pod *v1.Pod, c *v1.Container) bool {
	if !m.swap.Limited || kubecontainer.IsCriticalPod(pod) || kubecontainer.GetPodQOS(pod) != v1.PodQOSBurstable {
		return false
	}
	req, limit := c.Resources.Requests.Memory(), c.Resources.Limits.Memory()
	if req.IsZero() && limit.IsZero() {
		return false
	}
	return req.Cmp(*limit) != 0
}

// swapShare is request/machine of the machine's swap (upstream's
// calcSwapForBurstablePods); false when it cannot be worked out.
func swapShare(request, machine, swap int64) (int64, bool) {
	if machine <= 0 || request > machine {
		return 0, false
	}
	return int64(float64(request) / float64(machine) * float64(swap)), true
}
