package resources

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestResolveFieldRef(t *testing.T) {
	t.Parallel()
	q := resource.MustParse
	allocatable := v1.ResourceList{"cpu": q("3700m"), "memory": q("7Gi"), "ephemeral-storage": q("90Gi")}
	limited := v1.Container{Name: "limited", Resources: v1.ResourceRequirements{
		Limits:   v1.ResourceList{"cpu": q("500m"), "memory": q("256Mi"), "hugepages-2Mi": q("4Mi"), "ephemeral-storage": q("1Gi")},
		Requests: v1.ResourceList{"cpu": q("250m"), "memory": q("128Mi")},
	}}
	zeroLimits := v1.Container{Name: "zero", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{"cpu": q("0"), "memory": q("0"), "ephemeral-storage": q("0")},
	}}
	unset := v1.Container{Name: "unset"}
	initC := v1.Container{Name: "init", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"memory": q("64Mi")}}}
	pod := func(podLimits v1.ResourceList) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{limited, zeroLimits, unset}, InitContainers: []v1.Container{initC}}}
		if podLimits != nil {
			p.Spec.Resources = &v1.ResourceRequirements{Limits: podLimits}
		}
		return p
	}
	podLevel := v1.ResourceList{"cpu": q("2"), "memory": q("1Gi"), "ephemeral-storage": q("5Gi")}
	for _, tc := range []struct {
		desc      string
		resource  string
		container string        // the selector's containerName
		self      *v1.Container // the container being started (env); nil: a volume file
		divisor   string
		podLimits v1.ResourceList
		want      string
		wantErr   string
	}{
		{desc: "container limit", resource: "limits.cpu", self: &limited, divisor: "1m", want: "500"},
		{desc: "cpu rounds up to whole cores", resource: "limits.cpu", self: &limited, want: "1"},
		{desc: "memory in Mi", resource: "limits.memory", self: &limited, divisor: "1Mi", want: "256"},
		{desc: "request", resource: "requests.cpu", self: &limited, divisor: "1m", want: "250"},
		{desc: "unset request is 0, never defaulted", resource: "requests.memory", self: &unset, want: "0"},
		{desc: "hugepages limit", resource: "limits.hugepages-2Mi", self: &limited, divisor: "1Mi", want: "4"},
		{desc: "unset hugepages limit is not defaulted", resource: "limits.hugepages-2Mi", self: &unset, want: "0"},
		{desc: "unset limit: allocatable, not capacity", resource: "limits.cpu", self: &unset, divisor: "1m", want: "3700"},
		{desc: "zero limit counts as unset", resource: "limits.memory", self: &zeroLimits, divisor: "1Gi", want: "7"},
		{desc: "unset ephemeral-storage: allocatable", resource: "limits.ephemeral-storage", self: &unset, divisor: "1Gi", want: "90"},
		{desc: "pod-level cpu before allocatable", resource: "limits.cpu", self: &unset, podLimits: podLevel, want: "2"},
		{desc: "pod-level memory for a zero limit", resource: "limits.memory", self: &zeroLimits, podLimits: podLevel, divisor: "1Mi", want: "1024"},
		{desc: "container limit before pod-level", resource: "limits.memory", self: &limited, podLimits: podLevel, divisor: "1Mi", want: "256"},
		{desc: "pod-level ephemeral-storage is not used", resource: "limits.ephemeral-storage", self: &unset, podLimits: podLevel, divisor: "1Gi", want: "90"},
		{desc: "zero pod-level limit: allocatable", resource: "limits.cpu", self: &unset, podLimits: v1.ResourceList{"cpu": q("0")}, want: "4"},
		{desc: "pod-level requests only: allocatable", resource: "limits.cpu", self: &unset, podLimits: v1.ResourceList{}, want: "4"},
		{desc: "named container wins over self", resource: "limits.memory", container: "limited", self: &unset, divisor: "1Mi", want: "256"},
		{desc: "volume file names its container", resource: "limits.cpu", container: "unset", divisor: "1m", want: "3700"},
		{desc: "volume file of an init container, defaulted too", resource: "limits.cpu", container: "init", want: "4"},
		{desc: "init container's own limit", resource: "limits.memory", container: "init", divisor: "1Mi", want: "64"},
		{desc: "volume file without containerName", resource: "limits.cpu", wantErr: "needs a containerName"},
		{desc: "unknown container", resource: "limits.cpu", container: "nope", wantErr: "container nope not found"},
		{desc: "unsupported resource", resource: "limits.nvidia.com/gpu", self: &limited, wantErr: "unsupported container resource : limits.nvidia.com/gpu"},
		{desc: "unsupported kind", resource: "usage.cpu", self: &limited, wantErr: "unsupported container resource"},
		{desc: "no kind", resource: "cpu", self: &limited, wantErr: "unsupported container resource"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			fs := &v1.ResourceFieldSelector{Resource: tc.resource, ContainerName: tc.container}
			if tc.divisor != "" {
				fs.Divisor = q(tc.divisor)
			}
			got, err := ResolveFieldRef(fs, pod(tc.podLimits), tc.self, allocatable)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("ResolveFieldRef = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
