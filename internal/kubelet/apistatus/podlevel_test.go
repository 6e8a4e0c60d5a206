package apistatus

import (
	"errors"
	"testing"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/podtest"
)

// fakePodCgroups reads the same values for every pod.
type fakePodCgroups struct {
	applied kubecontainer.PodCgroupResources
	err     error
}

func (f fakePodCgroups) PodCgroupResources(*v1.Pod) (kubecontainer.PodCgroupResources, error) {
	return f.applied, f.err
}

type rl = map[v1.ResourceName]string

// applied is a pod cgroup holding cpu.shares, a CFS quota (period 100ms; -1:
// none) and a memory limit (-1: none).
func applied(shares uint64, quota, memory int64) kubecontainer.PodCgroupResources {
	period := uint64(100000)
	return kubecontainer.PodCgroupResources{CPUShares: &shares, CPUQuota: &quota, CPUPeriod: &period, Memory: &memory}
}

func TestPodLevelResourcesStatus(t *testing.T) {
	t.Parallel()
	const mi = 1 << 20
	podLevel := podtest.Resources(rl{v1.ResourceCPU: "80m", v1.ResourceMemory: "95Mi"}, rl{v1.ResourceCPU: "80m", v1.ResourceMemory: "95Mi"})
	withPodLevel := func(r v1.ResourceRequirements, phase v1.PodPhase) *v1.Pod {
		p := podtest.WithContainers(v1.ResourceRequirements{})
		p.Spec.Resources = &r
		p.Status.Phase = phase
		return p
	}
	running := v1.PodStatus{Phase: v1.PodRunning, Resources: ptr(podtest.Resources(rl{v1.ResourceCPU: "70m"}, rl{v1.ResourceCPU: "70m", v1.ResourceMemory: "90Mi"}))}
	for _, tc := range []struct {
		desc          string
		pod           *v1.Pod
		cgroup        fakePodCgroups
		old           v1.PodStatus
		wantResources v1.ResourceRequirements
		wantAllocated rl
	}{
		{
			desc: "pending: what it is allocated",
			pod:  withPodLevel(podLevel, v1.PodPending), cgroup: fakePodCgroups{applied: applied(2, -1, -1)},
			wantResources: podLevel, wantAllocated: rl{v1.ResourceCPU: "80m", v1.ResourceMemory: "95Mi"},
		},
		{
			desc: "running, the allocation applied: the allocated values",
			pod:  withPodLevel(podLevel, v1.PodRunning), cgroup: fakePodCgroups{applied: applied(81, 8000, 95*mi)},
			wantResources: podLevel, wantAllocated: rl{v1.ResourceCPU: "80m", v1.ResourceMemory: "95Mi"},
		},
		{
			desc: "running, cgroup v2 shares read back: still the allocated request",
			pod:  withPodLevel(podLevel, v1.PodRunning), cgroup: fakePodCgroups{applied: applied(80, 8000, 95*mi)},
			wantResources: podLevel, wantAllocated: rl{v1.ResourceCPU: "80m", v1.ResourceMemory: "95Mi"},
		},
		{
			desc: "running, the cgroup not resized yet: what it applies",
			pod:  withPodLevel(podLevel, v1.PodRunning), cgroup: fakePodCgroups{applied: applied(102, 10000, 100*mi)},
			wantResources: podtest.Resources(rl{v1.ResourceCPU: "100m", v1.ResourceMemory: "95Mi"}, rl{v1.ResourceCPU: "100m", v1.ResourceMemory: "100Mi"}),
			wantAllocated: rl{v1.ResourceCPU: "80m", v1.ResourceMemory: "95Mi"},
		},
		{
			desc: "running, unreadable: the previous running status's values",
			pod:  withPodLevel(podLevel, v1.PodRunning), cgroup: fakePodCgroups{err: errors.New("gone")}, old: running,
			wantResources: podtest.Resources(rl{v1.ResourceCPU: "70m", v1.ResourceMemory: "95Mi"}, rl{v1.ResourceCPU: "70m", v1.ResourceMemory: "90Mi"}),
			wantAllocated: rl{v1.ResourceCPU: "80m", v1.ResourceMemory: "95Mi"},
		},
		{
			desc:          "running, tiny values at the cgroups' minimums: the allocated ones",
			pod:           withPodLevel(podtest.Resources(rl{v1.ResourceCPU: "2m"}, rl{v1.ResourceCPU: "5m"}), v1.PodRunning),
			cgroup:        fakePodCgroups{applied: applied(2, 1000, -1)},
			wantResources: podtest.Resources(rl{v1.ResourceCPU: "2m"}, rl{v1.ResourceCPU: "5m"}),
			wantAllocated: rl{v1.ResourceCPU: "2m"},
		},
		{
			desc: "running without pod-level resources: the containers' as the cgroup applies them",
			pod: func() *v1.Pod {
				r := podtest.Resources(rl{v1.ResourceCPU: "20m", v1.ResourceMemory: "35Mi"}, rl{v1.ResourceCPU: "20m", v1.ResourceMemory: "35Mi"})
				p := podtest.WithContainers(r)
				p.Status.Phase = v1.PodRunning
				return p
			}(),
			cgroup:        fakePodCgroups{applied: applied(20, 2000, 35*mi)},
			wantResources: podtest.Resources(rl{v1.ResourceCPU: "20m", v1.ResourceMemory: "35Mi"}, rl{v1.ResourceCPU: "20m", v1.ResourceMemory: "35Mi"}),
			wantAllocated: rl{v1.ResourceCPU: "20m", v1.ResourceMemory: "35Mi"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			g, err := New(Options{Status: status.NewManager(status.Options{Logger: zaptest.NewLogger(t)}), Reasons: NewReasonCache(),
				PodCgroups: tc.cgroup})
			if err != nil {
				t.Fatal(err)
			}
			var s v1.PodStatus
			g.setPodLevelResources(tc.pod, &s, &tc.old)
			if s.Resources == nil || !resourcesEqual(*s.Resources, tc.wantResources) {
				t.Errorf("resources = %+v, want %+v", s.Resources, tc.wantResources)
			}
			if want := podtest.Resources(tc.wantAllocated, nil).Requests; !apiequality.Semantic.DeepEqual(s.AllocatedResources, want) {
				t.Errorf("allocatedResources = %v, want %v", s.AllocatedResources, want)
			}
		})
	}
}

// Without a pod cgroup reader (InPlacePodLevelResourcesVerticalScaling off)
// the pod status has no pod-level resources.
func TestPodLevelResourcesStatusOff(t *testing.T) {
	t.Parallel()
	g := newGenerator(t)
	pod := staticPod("p", "uid-p")
	r := podtest.Resources(rl{v1.ResourceCPU: "1"}, nil)
	pod.Spec.Resources = &r
	s := g.Generate(pod, nil, false)
	if s.Resources != nil || s.AllocatedResources != nil {
		t.Errorf("pod-level status %v / %v, want none", s.Resources, s.AllocatedResources)
	}
}

// resourcesEqual compares two requirements, an empty list being no list.
func resourcesEqual(a, b v1.ResourceRequirements) bool {
	norm := func(l v1.ResourceList) v1.ResourceList {
		if len(l) == 0 {
			return nil
		}
		return l
	}
	return apiequality.Semantic.DeepEqual(norm(a.Requests), norm(b.Requests)) && apiequality.Semantic.DeepEqual(norm(a.Limits), norm(b.Limits))
}
