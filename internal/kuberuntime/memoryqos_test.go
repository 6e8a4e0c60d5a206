package kuberuntime

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestMemoryQoSUnified: upstream's MemoryQoS keys for containers
// (generateLinuxContainerResources with memoryReservationPolicy None).
func TestMemoryQoSUnified(t *testing.T) {
	t.Parallel()
	on := MemoryQoS{CgroupV2: true, Enabled: true, ThrottlingFactor: 0.9, AllocatableMemory: 1 << 30}
	mem := func(s string) v1.ResourceList { return v1.ResourceList{v1.ResourceMemory: resource.MustParse(s)} }
	ctr := func(req, lim v1.ResourceList) *v1.Container {
		return &v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: req, Limits: lim}}
	}
	plain := &v1.Pod{}
	podLimited := &v1.Pod{Spec: v1.PodSpec{Resources: &v1.ResourceRequirements{Limits: mem("256Mi")}}}
	for _, tc := range []struct {
		desc string
		q    MemoryQoS
		pod  *v1.Pod
		c    *v1.Container
		want map[string]string
	}{
		{"cgroup v1: nothing", MemoryQoS{Enabled: true, ThrottlingFactor: 0.9}, plain, ctr(mem("32Mi"), mem("64Mi")), nil},
		{"gate off on v2: the throttle cleared", MemoryQoS{CgroupV2: true, ThrottlingFactor: 0.9}, plain, ctr(mem("32Mi"), mem("64Mi")),
			map[string]string{"memory.high": "max"}},
		// floor((32Mi + 0.9*32Mi) / 4096) * 4096
		{"burstable", on, plain, ctr(mem("32Mi"), mem("64Mi")),
			map[string]string{"memory.min": "0", "memory.low": "0", "memory.high": "63750144"}},
		{"request equals limit: no throttle", on, plain, ctr(mem("48Mi"), mem("48Mi")),
			map[string]string{"memory.min": "0", "memory.low": "0"}},
		// no limit: 0.9 of the allocatable memory, page-aligned
		{"best effort", on, plain, ctr(nil, nil),
			map[string]string{"memory.min": "0", "memory.low": "0", "memory.high": "966365184"}},
		{"pod-level memory limit throttles the pod instead", on, podLimited, ctr(mem("32Mi"), nil),
			map[string]string{"memory.min": "0", "memory.low": "0"}},
		{"no allocatable known", MemoryQoS{CgroupV2: true, Enabled: true, ThrottlingFactor: 0.9}, plain, ctr(nil, nil),
			map[string]string{"memory.min": "0", "memory.low": "0"}},
	} {
		if got := tc.q.unified(tc.pod, tc.c); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}
