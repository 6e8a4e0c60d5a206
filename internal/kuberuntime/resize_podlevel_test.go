package kuberuntime

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// The resize plan of a pod with pod-level resources: container a has no
// resources of its own (it runs under the pod's limits), b has its own
// limits. A change of the pod-level limits resizes a (in place, or by a
// restart when its policy says so) and the pod cgroup, never b; a change of
// the pod-level requests alone resizes the pod cgroup only.
func TestPlanPodLevelResize(t *testing.T) {
	t.Parallel()
	running := kubecontainer.StateRunning
	podLevel := func(cpu, mem string) *v1.ResourceRequirements {
		r := res(cpu, mem, cpu, mem)
		return &r
	}
	tests := []struct {
		desc             string
		allocated        *v1.ResourceRequirements
		actuatedPodLevel *v1.ResourceRequirements
		policyA          []v1.ContainerResizePolicy
		wantMem, wantCPU []string
		wantRestartA     bool
		wantPodLevel     bool
	}{
		{desc: "applied: nothing to do", allocated: podLevel("80m", "95Mi"), actuatedPodLevel: podLevel("80m", "95Mi")},
		{desc: "pod-level cpu grows: a's cpu in place, and the pod cgroup",
			allocated: podLevel("100m", "95Mi"), actuatedPodLevel: podLevel("80m", "95Mi"),
			wantCPU: []string{"a"}, wantPodLevel: true},
		{desc: "pod-level memory shrinks, a restarts for memory",
			allocated: podLevel("80m", "90Mi"), actuatedPodLevel: podLevel("80m", "95Mi"),
			policyA:      []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}},
			wantRestartA: true, wantPodLevel: true},
		{desc: "pod-level cpu grows, a restarts only for memory: in place",
			allocated: podLevel("100m", "95Mi"), actuatedPodLevel: podLevel("80m", "95Mi"),
			policyA: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}},
			wantCPU: []string{"a"}, wantPodLevel: true},
		{desc: "pod-level requests only: the pod cgroup alone",
			allocated:        &v1.ResourceRequirements{Requests: res("100m", "95Mi", "", "").Requests, Limits: podLevel("80m", "95Mi").Limits},
			actuatedPodLevel: podLevel("80m", "95Mi"), wantPodLevel: true},
		{desc: "pod-level resources added to a pod that had none",
			allocated: podLevel("80m", "95Mi"), wantCPU: []string{"a"}, wantMem: []string{"a"}, wantPodLevel: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, func(o *Options) { o.StateDir = t.TempDir() })
			pod := testPod("a", "b")
			pod.Spec.Resources = tc.allocated
			pod.Spec.Containers[0].ResizePolicy = tc.policyA
			pod.Spec.Containers[1].Resources = res("10m", "20Mi", "20m", "40Mi")
			// What the containers were created with: a under the actuated
			// pod-level limits.
			actuatedPod := pod.DeepCopy()
			actuatedPod.Spec.Resources = tc.actuatedPodLevel
			env.m.initActuated(actuatedPod)
			for i := range actuatedPod.Spec.Containers {
				env.m.recordCreated(actuatedPod, &actuatedPod.Spec.Containers[i])
			}
			c := pod.Spec.Containers
			status := podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], running, 0), cstatus(&c[1], running, 0))
			got := env.m.computePodActions(pod, status, false)
			names := func(list []containerToUpdate) []string {
				var out []string
				for _, u := range list {
					out = append(out, u.container.Name)
				}
				return out
			}
			if m, c := names(got.ContainersToUpdate[v1.ResourceMemory]), names(got.ContainersToUpdate[v1.ResourceCPU]); !slices.Equal(m, tc.wantMem) || !slices.Equal(c, tc.wantCPU) {
				t.Errorf("updates: memory %v cpu %v, want %v %v", m, c, tc.wantMem, tc.wantCPU)
			}
			_, restartA := got.ContainersToKill[cstatus(&c[0], running, 0).ID]
			if restartA != tc.wantRestartA || got.UpdatePodLevelResources != tc.wantPodLevel {
				t.Errorf("restart a %v, pod-level resize %v; want %v %v", restartA, got.UpdatePodLevelResources, tc.wantRestartA, tc.wantPodLevel)
			}
			want := tc.wantPodLevel || len(tc.wantCPU)+len(tc.wantMem) > 0
			if env.m.IsPodResizeInProgress(pod, status) != want {
				t.Errorf("IsPodResizeInProgress = %v, want %v", !want, want)
			}
		})
	}
}

// fakePodCgroups is a pod cgroup in memory: its values, and what
// ResizePodCgroup wrote, in order.
type fakePodCgroups struct {
	cur, want kubecontainer.PodCgroupResources
	writes    []kubecontainer.PodCgroupResources
}

func (f *fakePodCgroups) PodCgroupResources(*v1.Pod) (kubecontainer.PodCgroupResources, error) {
	return f.cur, nil
}

func (f *fakePodCgroups) DesiredPodCgroupResources(*v1.Pod) kubecontainer.PodCgroupResources {
	return f.want
}

func (f *fakePodCgroups) ResizePodCgroup(_ *v1.Pod, r kubecontainer.PodCgroupResources) error {
	f.writes = append(f.writes, r)
	return nil
}

// A pod-level resize carried out: the pod cgroup's memory grows before the
// container's, its cpu quota shrinks after the container's, the container
// gets the pod's new limits, and the new pod-level resources are recorded as
// actuated (the resize is no longer in progress). A memory limit below the
// pod's usage fails the resize before anything changes.
func TestPodLevelResizeAction(t *testing.T) {
	t.Parallel()
	i64 := func(v int64) *int64 { return &v }
	u64 := func(v uint64) *uint64 { return &v }
	for _, tc := range []struct {
		desc      string
		usage     int64
		wantErr   string
		wantWrite []kubecontainer.PodCgroupResources
	}{
		{desc: "memory up, cpu down", usage: 10 << 20, wantWrite: []kubecontainer.PodCgroupResources{
			{Memory: i64(128 << 20)}, {CPUQuota: i64(5000), CPUPeriod: u64(100000)}}},
		{desc: "below usage", usage: 200 << 20,
			wantErr: "cannot decrease memory limits: attempting to set pod memory limit (134217728) below current usage (209715200)"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			cg := &fakePodCgroups{
				cur:  kubecontainer.PodCgroupResources{CPUShares: u64(81), CPUQuota: i64(8000), CPUPeriod: u64(100000), Memory: i64(96 << 20), MemoryUsage: tc.usage},
				want: kubecontainer.PodCgroupResources{CPUShares: u64(81), CPUQuota: i64(5000), CPUPeriod: u64(100000), Memory: i64(128 << 20)},
			}
			if tc.wantErr != "" {
				// A decrease, for the usage check.
				cg.cur.Memory, cg.want.Memory = i64(256<<20), i64(128<<20)
			}
			env := newTestEnv(t, func(o *Options) { o.StateDir = t.TempDir(); o.PodCgroups = cg })
			pod := testPod("a")
			old := res("80m", "96Mi", "80m", "96Mi")
			pod.Spec.Resources = &old
			env.m.initActuated(pod)
			env.m.recordCreated(pod, &pod.Spec.Containers[0])
			resized := res("80m", "96Mi", "50m", "128Mi")
			pod.Spec.Resources = &resized
			c := pod.Spec.Containers
			status := podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], kubecontainer.StateRunning, 0))
			changes := env.m.computePodActions(pod, status, false)
			if !changes.needsResize() {
				t.Fatal("no resize planned")
			}
			var result kubecontainer.PodSyncResult
			env.m.doPodResizeAction(context.Background(), pod, changes, &result)
			if got := result.Error(); (got == nil) != (tc.wantErr == "") || (got != nil && result.SyncResults[0].Message != tc.wantErr) {
				t.Fatalf("resize error %v (%+v), want %q", got, result.SyncResults, tc.wantErr)
			}
			if !podCgroupWritesEqual(cg.writes, tc.wantWrite) {
				t.Errorf("pod cgroup writes %s, want %s", fmtWrites(cg.writes), fmtWrites(tc.wantWrite))
			}
			a, _ := env.m.actuated.Container(pod.UID, "a")
			recorded, _ := env.m.actuated.PodLevel(pod.UID)
			if tc.wantErr != "" {
				if !a.Limits.Memory().Equal(resource.MustParse("96Mi")) || !recorded.Limits.Cpu().Equal(resource.MustParse("80m")) {
					t.Errorf("a failed resize changed the actuated state: a %+v, pod %+v", a, recorded)
				}
				return
			}
			if !a.Limits.Memory().Equal(resource.MustParse("128Mi")) || !a.Limits.Cpu().Equal(resource.MustParse("50m")) {
				t.Errorf("a's actuated resources %+v, want the pod's new limits 50m/128Mi", a)
			}
			if valuesOf(*recorded) != valuesOf(resized) || env.m.IsPodResizeInProgress(pod, status) {
				t.Errorf("actuated pod-level %+v, want %+v (in progress: %v)", recorded, resized, env.m.IsPodResizeInProgress(pod, status))
			}
		})
	}
}

func podCgroupWritesEqual(a, b []kubecontainer.PodCgroupResources) bool {
	return fmtWrites(a) == fmtWrites(b)
}

func fmtWrites(ws []kubecontainer.PodCgroupResources) string {
	out := "["
	for _, w := range ws {
		out += "{"
		if w.Memory != nil {
			out += " memory=" + resource.NewQuantity(*w.Memory, resource.BinarySI).String()
		}
		if w.CPUQuota != nil {
			out += " quota=" + resource.NewQuantity(*w.CPUQuota, resource.DecimalSI).String()
		}
		if w.CPUShares != nil {
			out += " shares=" + resource.NewQuantity(int64(*w.CPUShares), resource.DecimalSI).String()
		}
		out += " }"
	}
	return out + "]"
}
