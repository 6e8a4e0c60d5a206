package container

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/podtest"
)

// The pod builders of internal/testutil/podtest, under this file's names.
var (
	rcResources = podtest.Resources
	rcQOSPod    = podtest.WithContainers
)

var (
	rcCPU = v1.ResourceCPU
	rcMem = v1.ResourceMemory
)

func TestGetPodQOS(t *testing.T) {
	t.Parallel()
	full := rcResources(map[v1.ResourceName]string{rcCPU: "1", rcMem: "1Gi"}, map[v1.ResourceName]string{rcCPU: "1", rcMem: "1Gi"})
	for _, tc := range []struct {
		desc string
		pod  *v1.Pod
		want v1.PodQOSClass
	}{
		{desc: "nothing set", pod: rcQOSPod(v1.ResourceRequirements{}), want: v1.PodQOSBestEffort},
		{desc: "only other resources", pod: rcQOSPod(rcResources(map[v1.ResourceName]string{"nvidia.com/gpu": "1"}, map[v1.ResourceName]string{"nvidia.com/gpu": "1"})), want: v1.PodQOSBestEffort},
		{desc: "zero quantities", pod: rcQOSPod(rcResources(map[v1.ResourceName]string{rcCPU: "0"}, nil)), want: v1.PodQOSBestEffort},
		{desc: "requests equal limits for cpu and memory", pod: rcQOSPod(full, full), want: v1.PodQOSGuaranteed},
		{desc: "limits only (requests default to them)", pod: rcQOSPod(rcResources(nil, map[v1.ResourceName]string{rcCPU: "1", rcMem: "1Gi"})), want: v1.PodQOSBurstable},
		{desc: "requests below limits", pod: rcQOSPod(rcResources(map[v1.ResourceName]string{rcCPU: "500m", rcMem: "1Gi"}, map[v1.ResourceName]string{rcCPU: "1", rcMem: "1Gi"})), want: v1.PodQOSBurstable},
		{desc: "memory limit missing", pod: rcQOSPod(rcResources(map[v1.ResourceName]string{rcCPU: "1"}, map[v1.ResourceName]string{rcCPU: "1"})), want: v1.PodQOSBurstable},
		{desc: "one guaranteed, one best effort container", pod: rcQOSPod(full, v1.ResourceRequirements{}), want: v1.PodQOSBurstable},
		{desc: "status wins", pod: func() *v1.Pod { p := rcQOSPod(); p.Status.QOSClass = v1.PodQOSGuaranteed; return p }(), want: v1.PodQOSGuaranteed},
		{
			desc: "pod-level requests equal limits: Guaranteed whatever the containers",
			pod: func() *v1.Pod {
				p := rcQOSPod(v1.ResourceRequirements{}, v1.ResourceRequirements{})
				r := rcResources(map[v1.ResourceName]string{rcCPU: "1", rcMem: "1Gi"}, map[v1.ResourceName]string{rcCPU: "1", rcMem: "1Gi"})
				p.Spec.Resources = &r
				return p
			}(),
			want: v1.PodQOSGuaranteed,
		},
		{
			desc: "pod-level requests below limits: Burstable",
			pod: func() *v1.Pod {
				p := rcQOSPod(full)
				r := rcResources(map[v1.ResourceName]string{rcCPU: "1"}, map[v1.ResourceName]string{rcCPU: "2", rcMem: "1Gi"})
				p.Spec.Resources = &r
				return p
			}(),
			want: v1.PodQOSBurstable,
		},
		{
			desc: "init container without limits spoils Guaranteed",
			pod: func() *v1.Pod {
				p := rcQOSPod(full)
				p.Spec.InitContainers = []v1.Container{{Name: "init", Resources: rcResources(map[v1.ResourceName]string{rcMem: "1Gi"}, nil)}}
				return p
			}(),
			want: v1.PodQOSBurstable,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := GetPodQOS(tc.pod); got != tc.want {
				t.Errorf("GetPodQOS = %v, want %v", got, tc.want)
			}
		})
	}
}
