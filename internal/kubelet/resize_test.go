package kubelet

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/podtest"
)

type resList = map[v1.ResourceName]string

// resizePod is a pod with one container c of cpu/memory requests and limits
// cpuMem, and pod-level resources of the same form when podLevel is given.
func resizePod(cpuMem resList, podLevel resList) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1", Generation: 1},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Resources: podtest.Resources(cpuMem, cpuMem)}}}}
	if podLevel != nil {
		r := podtest.Resources(podLevel, podLevel)
		p.Spec.Resources = &r
	}
	return p
}

// The resize decisions on the allocation: a change of the container's or the
// pod-level resources is a resize; the allocated pod carries both; a
// pod-level resize is infeasible with InPlacePodLevelResourcesVerticalScaling
// off, a Guaranteed pod's cpu one with the static CPU manager, its memory
// one with the Static memory manager.
func TestResizerDecisions(t *testing.T) {
	t.Parallel()
	small := resList{v1.ResourceCPU: "100m", v1.ResourceMemory: "64Mi"}
	big := resList{v1.ResourceCPU: "200m", v1.ResourceMemory: "64Mi"}
	bigMem := resList{v1.ResourceCPU: "100m", v1.ResourceMemory: "128Mi"}
	for _, tc := range []struct {
		desc                              string
		cpuStatic, memStatic, podLevelOff bool
		allocated, desired                *v1.Pod
		wantResize                        bool
		wantInfeasible                    string
	}{
		{desc: "no change", allocated: resizePod(small, small), desired: resizePod(small, small)},
		{desc: "container resize", allocated: resizePod(small, nil), desired: resizePod(big, nil), wantResize: true},
		{desc: "pod-level resize", allocated: resizePod(small, small), desired: resizePod(small, big), wantResize: true},
		{desc: "pod-level resources added", allocated: resizePod(small, nil), desired: resizePod(small, big), wantResize: true},
		{desc: "pod-level resize with the gate off", podLevelOff: true,
			allocated: resizePod(small, small), desired: resizePod(small, big), wantResize: true,
			wantInfeasible: "InPlacePodLevelResourcesVerticalScaling is disabled"},
		{desc: "container resize with the gate off", podLevelOff: true,
			allocated: resizePod(small, small), desired: resizePod(big, small), wantResize: true},
		{desc: "Guaranteed cpu resize, static CPU manager", cpuStatic: true,
			allocated: resizePod(small, nil), desired: resizePod(big, nil), wantResize: true,
			wantInfeasible: `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`},
		{desc: "Guaranteed memory resize, Static memory manager", memStatic: true,
			allocated: resizePod(small, nil), desired: resizePod(bigMem, nil), wantResize: true,
			wantInfeasible: `Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "Static"`},
		{desc: "Guaranteed cpu resize, Static memory manager", memStatic: true,
			allocated: resizePod(small, nil), desired: resizePod(big, nil), wantResize: true},
		{desc: "Guaranteed memory resize, static CPU manager", cpuStatic: true,
			allocated: resizePod(small, nil), desired: resizePod(bigMem, nil), wantResize: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			state, err := kubecontainer.OpenResourceState(t.TempDir(), kubecontainer.AllocatedPodsStateFile)
			if err != nil {
				t.Fatal(err)
			}
			r := newResizer(state, tc.cpuStatic, tc.memStatic, tc.podLevelOff)
			if err := r.allocate(tc.allocated); err != nil {
				t.Fatal(err)
			}
			if got := r.resizeRequested(tc.desired); got != tc.wantResize {
				t.Errorf("resizeRequested = %v, want %v", got, tc.wantResize)
			}
			info, _ := state.Get(tc.desired.UID)
			if got := r.infeasible(tc.desired, info); got != tc.wantInfeasible {
				t.Errorf("infeasible = %q, want %q", got, tc.wantInfeasible)
			}
			// What the pod workers sync is the allocation, pod-level
			// resources included.
			synced := r.allocatedPod(tc.desired)
			if !resourceInfoEqual(kubecontainer.ResourceInfoForPod(synced), kubecontainer.ResourceInfoForPod(tc.allocated)) {
				t.Errorf("allocated pod %+v / %+v, want the allocation %+v / %+v", synced.Spec.Containers[0].Resources,
					synced.Spec.Resources, tc.allocated.Spec.Containers[0].Resources, tc.allocated.Spec.Resources)
			}
		})
	}
}
