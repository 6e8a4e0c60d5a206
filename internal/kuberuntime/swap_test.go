package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// A container's swap is upstream's: NoSwap (the default) is a memory+swap
// limit equal to the memory limit on cgroup v1 and memory.swap.max 0 on v2;
// LimitedSwap (v2 only) gives a Burstable container with a memory request
// other than its limit its request's share of the machine's memory, applied
// to the machine's swap (8Gi of memory, 16Gi of swap: 32Mi of request is
// 64Mi of swap); nothing without the swap controller.
func TestContainerSwap(t *testing.T) {
	t.Parallel()
	const mi = int64(1) << 20
	v2 := MemoryQoS{CgroupV2: true}
	mem := func(req, limit string) v1.ResourceRequirements {
		var r v1.ResourceRequirements
		if req != "" {
			r.Requests = rcResources(map[v1.ResourceName]string{rcMem: req}, nil).Requests
		}
		if limit != "" {
			r.Limits = rcResources(nil, map[v1.ResourceName]string{rcMem: limit}).Limits
		}
		return r
	}
	critical := func(p *v1.Pod) { p.Spec.Priority = ptr.To(int32(2000001000)) }
	for _, tc := range []struct {
		desc    string
		qos     MemoryQoS
		swap    Swap
		res     v1.ResourceRequirements
		pod     func(*v1.Pod)
		memsw   int64
		swapMax string // "": no memory.swap.max key
	}{
		{desc: "no swap controller: nothing", swap: Swap{}, res: mem("", "64Mi")},
		{desc: "cgroup v1, NoSwap: memory+swap = memory", swap: Swap{ControllerAvailable: true}, res: mem("", "64Mi"), memsw: 64 * mi},
		{desc: "cgroup v1 without a memory limit", swap: Swap{ControllerAvailable: true}, res: mem("32Mi", "")},
		{desc: "cgroup v1, LimitedSwap: NoSwap", swap: Swap{ControllerAvailable: true, Limited: true, Capacity: 16 << 30}, res: mem("32Mi", "64Mi"), memsw: 64 * mi},
		{desc: "cgroup v2, NoSwap", qos: v2, swap: Swap{ControllerAvailable: true}, res: mem("32Mi", "64Mi"), swapMax: "0"},
		{desc: "cgroup v2, LimitedSwap, Burstable", qos: v2, swap: Swap{ControllerAvailable: true, Limited: true, Capacity: 16 << 30}, res: mem("32Mi", "64Mi"), swapMax: "67108864"},
		{desc: "cgroup v2, LimitedSwap, a request without a limit", qos: v2, swap: Swap{ControllerAvailable: true, Limited: true, Capacity: 16 << 30}, res: mem("32Mi", ""), swapMax: "67108864"},
		{desc: "cgroup v2, LimitedSwap, request = limit", qos: v2, swap: Swap{ControllerAvailable: true, Limited: true, Capacity: 16 << 30}, res: mem("64Mi", "64Mi"), swapMax: "0"},
		{desc: "cgroup v2, LimitedSwap, BestEffort", qos: v2, swap: Swap{ControllerAvailable: true, Limited: true, Capacity: 16 << 30}, swapMax: "0"},
		{desc: "cgroup v2, LimitedSwap, a critical pod", qos: v2, swap: Swap{ControllerAvailable: true, Limited: true, Capacity: 16 << 30}, res: mem("32Mi", "64Mi"), pod: critical, swapMax: "0"},
		{desc: "cgroup v2, LimitedSwap, a request above the machine's memory", qos: v2, swap: Swap{ControllerAvailable: true, Limited: true, Capacity: 16 << 30}, res: mem("9Gi", ""), swapMax: "0"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCEnv(t, func(o *Options) { o.MemoryQoS = tc.qos; o.Swap = tc.swap })
			pod := rcPod("c")
			pod.Spec.Containers[0].Resources = tc.res
			if tc.pod != nil {
				tc.pod(pod)
			}
			r := env.m.containerResources(pod, &pod.Spec.Containers[0])
			got, ok := r.GetUnified()["memory.swap.max"]
			if r.GetMemorySwapLimitInBytes() != tc.memsw || got != tc.swapMax || ok != (tc.swapMax != "") {
				t.Errorf("memory+swap %d, memory.swap.max %q (%v); want %d, %q", r.GetMemorySwapLimitInBytes(), got, ok, tc.memsw, tc.swapMax)
			}
		})
	}
}
