package container

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rcResources builds requirements from resource name -> quantity maps.
func rcResources(requests, limits map[v1.ResourceName]string) v1.ResourceRequirements {
	conv := func(in map[v1.ResourceName]string) v1.ResourceList {
		if in == nil {
			return nil
		}
		out := v1.ResourceList{}
		for k, v := range in {
			out[k] = resource.MustParse(v)
		}
		return out
	}
	return v1.ResourceRequirements{Requests: conv(requests), Limits: conv(limits)}
}

// rcQOSPod returns a pod whose containers have the given requirements.
func rcQOSPod(reqs ...v1.ResourceRequirements) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	for i, r := range reqs {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Resources: r})
	}
	return pod
}

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
