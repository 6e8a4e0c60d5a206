package container

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/podtest"
)

type resMap = map[v1.ResourceName]string

func TestEffectiveResources(t *testing.T) {
	t.Parallel()
	cpuMem := func(cpu, mem string) resMap {
		m := resMap{}
		if cpu != "" {
			m[v1.ResourceCPU] = cpu
		}
		if mem != "" {
			m[v1.ResourceMemory] = mem
		}
		return m
	}
	for _, tc := range []struct {
		desc      string
		podLevel  *v1.ResourceRequirements
		container v1.ResourceRequirements
		want      v1.ResourceRequirements
	}{
		{
			desc:      "no pod-level resources",
			container: podtest.Resources(cpuMem("10m", ""), cpuMem("20m", "")),
			want:      podtest.Resources(cpuMem("10m", ""), cpuMem("20m", "")),
		},
		{
			desc:      "pod-level requests only: nothing to fill in",
			podLevel:  &v1.ResourceRequirements{Requests: podtest.Resources(cpuMem("1", "1Gi"), nil).Requests},
			container: v1.ResourceRequirements{},
			want:      v1.ResourceRequirements{},
		},
		{
			desc:      "a container without limits runs under the pod's",
			podLevel:  ptrTo(podtest.Resources(cpuMem("80m", "95Mi"), cpuMem("80m", "95Mi"))),
			container: v1.ResourceRequirements{},
			want:      podtest.Resources(nil, cpuMem("80m", "95Mi")),
		},
		{
			desc:      "the container's own limits win; requests stay its own",
			podLevel:  ptrTo(podtest.Resources(cpuMem("80m", "95Mi"), cpuMem("80m", "95Mi"))),
			container: podtest.Resources(cpuMem("10m", "35Mi"), cpuMem("", "45Mi")),
			want:      podtest.Resources(cpuMem("10m", "35Mi"), cpuMem("80m", "45Mi")),
		},
		{
			desc:      "only the resources the pod limits",
			podLevel:  ptrTo(podtest.Resources(nil, cpuMem("25m", ""))),
			container: podtest.Resources(cpuMem("2m", ""), nil),
			want:      podtest.Resources(cpuMem("2m", ""), cpuMem("25m", "")),
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			in := *tc.container.DeepCopy()
			got := EffectiveResources(tc.podLevel, tc.container)
			if !apiequality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("EffectiveResources = %+v, want %+v", got, tc.want)
			}
			if !apiequality.Semantic.DeepEqual(in, tc.container) {
				t.Errorf("the container's resources changed: %+v", tc.container)
			}
		})
	}
}

func TestRemainingPodMemoryRequest(t *testing.T) {
	t.Parallel()
	const mi = 1 << 20
	withPodLevel := func(pod *v1.Pod, requests resMap) *v1.Pod {
		r := podtest.Resources(requests, nil)
		pod.Spec.Resources = &r
		return pod
	}
	for _, tc := range []struct {
		desc string
		pod  *v1.Pod
		want int64
	}{
		{desc: "no pod-level resources", pod: podtest.WithContainers(podtest.Resources(resMap{v1.ResourceMemory: "10Mi"}, nil))},
		{desc: "pod-level cpu only", pod: withPodLevel(podtest.WithContainers(v1.ResourceRequirements{}), resMap{v1.ResourceCPU: "1"})},
		{
			desc: "split between the containers",
			pod:  withPodLevel(podtest.WithContainers(v1.ResourceRequirements{}, v1.ResourceRequirements{}), resMap{v1.ResourceMemory: "100Mi"}),
			want: 50 * mi,
		},
		{
			desc: "what the containers request is not remaining; init containers count",
			pod: func() *v1.Pod {
				p := podtest.WithContainers(podtest.Resources(resMap{v1.ResourceMemory: "40Mi"}, nil), v1.ResourceRequirements{})
				p.Spec.InitContainers = []v1.Container{{Name: "init"}}
				return withPodLevel(p, resMap{v1.ResourceMemory: "100Mi"})
			}(),
			want: 20 * mi,
		},
		{
			desc: "containers requesting more than the pod",
			pod:  withPodLevel(podtest.WithContainers(podtest.Resources(resMap{v1.ResourceMemory: "200Mi"}, nil)), resMap{v1.ResourceMemory: "100Mi"}),
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := RemainingPodMemoryRequest(tc.pod); got != tc.want {
				t.Errorf("RemainingPodMemoryRequest = %d, want %d", got, tc.want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
