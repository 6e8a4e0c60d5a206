package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
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

func TestGetContainerOOMScoreAdjust(t *testing.T) {
	t.Parallel()
	const gi = int64(1 << 30)
	full := rcResources(map[v1.ResourceName]string{rcCPU: "1", rcMem: "1Gi"}, map[v1.ResourceName]string{rcCPU: "1", rcMem: "1Gi"})
	burstable := func(mem string) *v1.Pod {
		return rcQOSPod(rcResources(map[v1.ResourceName]string{rcMem: mem}, nil))
	}
	for _, tc := range []struct {
		desc    string
		pod     *v1.Pod
		machine int64
		want    int
	}{
		{desc: "guaranteed", pod: rcQOSPod(full), machine: 10 * gi, want: -997},
		{desc: "best effort", pod: rcQOSPod(v1.ResourceRequirements{}), machine: 10 * gi, want: 1000},
		{desc: "burstable 10% of memory", pod: burstable("1Gi"), machine: 10 * gi, want: 900},
		{desc: "burstable 50% of memory", pod: burstable("5Gi"), machine: 10 * gi, want: 500},
		{desc: "burstable requesting everything is clamped above guaranteed", pod: burstable("10Gi"), machine: 10 * gi, want: 3},
		{desc: "burstable requesting more than the machine", pod: burstable("20Gi"), machine: 10 * gi, want: 3},
		{desc: "burstable with a tiny request stays below best effort", pod: burstable("1"), machine: 10 * gi, want: 999},
		{desc: "burstable without memory request", pod: rcQOSPod(rcResources(map[v1.ResourceName]string{rcCPU: "100m"}, nil)), machine: 10 * gi, want: 999},
		{desc: "unknown machine memory", pod: burstable("1Gi"), machine: 0, want: 999},
		{
			desc: "burstable with a pod-level memory request: its unrequested share is added",
			pod: func() *v1.Pod {
				p := rcQOSPod(rcResources(map[v1.ResourceName]string{rcMem: "1Gi"}, nil), v1.ResourceRequirements{})
				p.Spec.Resources = &v1.ResourceRequirements{Requests: rcResources(map[v1.ResourceName]string{rcMem: "5Gi"}, nil).Requests}
				return p
			}(),
			machine: 10 * gi, want: 700, // (1Gi + (5Gi-1Gi)/2) of 10Gi
		},
		{
			desc: "static node-critical pod",
			pod: func() *v1.Pod {
				p := rcQOSPod(v1.ResourceRequirements{})
				p.Annotations = map[string]string{kubecontainer.ConfigSourceAnnotationKey: kubecontainer.FileSource}
				p.Spec.PriorityClassName = "system-node-critical"
				return p
			}(),
			machine: 10 * gi, want: -997,
		},
		{
			desc: "node-critical class alone (not a critical pod) is not enough",
			pod: func() *v1.Pod {
				p := rcQOSPod(v1.ResourceRequirements{})
				p.Spec.PriorityClassName = "system-node-critical"
				return p
			}(),
			machine: 10 * gi, want: 1000,
		},
		{
			desc: "node-critical priority",
			pod: func() *v1.Pod {
				p := rcQOSPod(v1.ResourceRequirements{})
				p.Spec.PriorityClassName = "system-node-critical"
				p.Spec.Priority = rcPtr(int32(2000001000))
				return p
			}(),
			machine: 10 * gi, want: -997,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := GetContainerOOMScoreAdjust(tc.pod, &tc.pod.Spec.Containers[0], tc.machine); got != tc.want {
				t.Errorf("oom score adj = %d, want %d", got, tc.want)
			}
		})
	}
}

// A sidecar scores no higher than the smallest regular container, whatever
// its own request.
func TestGetContainerOOMScoreAdjustSidecar(t *testing.T) {
	t.Parallel()
	const gi = int64(1 << 30)
	mem := func(q string) v1.ResourceRequirements { return rcResources(map[v1.ResourceName]string{rcMem: q}, nil) }
	always := v1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		desc    string
		sidecar string
		want    int
	}{
		{desc: "smaller than every regular container", sidecar: "1Gi", want: 800},
		{desc: "larger than the smallest", sidecar: "4Gi", want: 600},
	} {
		pod := rcQOSPod(mem("2Gi"), mem("3Gi"))
		pod.Spec.InitContainers = []v1.Container{{Name: "side", RestartPolicy: &always, Resources: mem(tc.sidecar)}}
		if got := GetContainerOOMScoreAdjust(pod, &pod.Spec.InitContainers[0], 10*gi); got != tc.want {
			t.Errorf("%s: oom score adj = %d, want %d", tc.desc, got, tc.want)
		}
	}
}
