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

func res(reqCPU, reqMem, limCPU, limMem string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	for _, e := range []struct {
		list v1.ResourceList
		name v1.ResourceName
		v    string
	}{{r.Requests, v1.ResourceCPU, reqCPU}, {r.Requests, v1.ResourceMemory, reqMem}, {r.Limits, v1.ResourceCPU, limCPU}, {r.Limits, v1.ResourceMemory, limMem}} {
		if e.v != "" {
			e.list[e.name] = resource.MustParse(e.v)
		}
	}
	return r
}

// The resize plan of running containers against the actuated state:
// nothing when equal, in-place updates (decreases first, per resource), a
// restart when a changed resource's policy says RestartContainer; and
// IsPodResizeInProgress follows.
func TestPlanResize(t *testing.T) {
	t.Parallel()
	running := kubecontainer.StateRunning
	tests := []struct {
		desc                string
		actuated            [2]v1.ResourceRequirements // of containers a and b
		policyB             []v1.ContainerResizePolicy
		wantMem, wantCPU    []string
		wantKill, wantStart bool
		wantPodResize       bool
		wantInProgress      bool
	}{
		{desc: "applied: nothing to do",
			actuated: [2]v1.ResourceRequirements{res("100m", "64Mi", "200m", "128Mi"), res("100m", "64Mi", "200m", "128Mi")}},
		{desc: "a grows memory, b shrinks it and grows cpu: b first for memory",
			actuated:       [2]v1.ResourceRequirements{res("100m", "64Mi", "200m", "64Mi"), res("50m", "64Mi", "100m", "256Mi")},
			wantMem:        []string{"b", "a"},
			wantCPU:        []string{"b"},
			wantInProgress: true},
		{desc: "b's memory policy is RestartContainer: b restarts, a is updated",
			actuated:       [2]v1.ResourceRequirements{res("100m", "64Mi", "200m", "64Mi"), res("100m", "64Mi", "200m", "256Mi")},
			policyB:        []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}},
			wantMem:        []string{"a"},
			wantKill:       true,
			wantStart:      true,
			wantPodResize:  true,
			wantInProgress: true},
		{desc: "only cpu changed, memory RestartContainer: in place",
			actuated:       [2]v1.ResourceRequirements{res("100m", "64Mi", "200m", "128Mi"), res("100m", "64Mi", "100m", "128Mi")},
			policyB:        []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}},
			wantCPU:        []string{"b"},
			wantInProgress: true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newTestEnv(t, func(o *Options) { o.StateDir = t.TempDir() })
			pod := testPod("a", "b")
			for i := range pod.Spec.Containers {
				pod.Spec.Containers[i].Resources = res("100m", "64Mi", "200m", "128Mi")
			}
			pod.Spec.Containers[1].ResizePolicy = tc.policyB
			for i, name := range []string{"a", "b"} {
				if err := env.m.actuated.SetContainer(pod.UID, name, tc.actuated[i]); err != nil {
					t.Fatal(err)
				}
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
			_, killed := got.ContainersToKill[cstatus(&c[1], running, 0).ID]
			if killed != tc.wantKill || (len(got.ContainersToStart) == 1) != tc.wantStart || got.UpdatePodResources != tc.wantPodResize {
				t.Errorf("kill b %v, start %v, pod resize %v; want %v %v %v", killed, got.ContainersToStart, got.UpdatePodResources, tc.wantKill, tc.wantStart, tc.wantPodResize)
			}
			if killed && got.ContainersToKill[cstatus(&c[1], running, 0).ID].message != "Container b resize requires restart" {
				t.Errorf("kill message %q", got.ContainersToKill[cstatus(&c[1], running, 0).ID].message)
			}
			if env.m.IsPodResizeInProgress(pod, status) != tc.wantInProgress {
				t.Errorf("IsPodResizeInProgress = %v, want %v", !tc.wantInProgress, tc.wantInProgress)
			}
		})
	}
}

// An in-place update sends the container its new cpu and memory, records
// them as actuated, and the memory phase keeps the old cpu.
func TestResizeUpdatesContainers(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, func(o *Options) { o.StateDir = t.TempDir() })
	pod := testPod("a")
	pod.Spec.Containers[0].Resources = res("200m", "64Mi", "400m", "256Mi")
	if err := env.m.actuated.SetContainer(pod.UID, "a", res("100m", "64Mi", "200m", "128Mi")); err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers
	status := podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], kubecontainer.StateRunning, 0))
	changes := env.m.computePodActions(pod, status, false)
	if err := env.m.updateContainers(context.Background(), pod, changes.ContainersToUpdate[v1.ResourceMemory], v1.ResourceMemory); err != nil {
		t.Fatal(err)
	}
	mid, _ := env.m.actuated.Container(pod.UID, "a")
	if !mid.Limits.Memory().Equal(resource.MustParse("256Mi")) || !mid.Limits.Cpu().Equal(resource.MustParse("200m")) {
		t.Errorf("after the memory phase the actuated resources are %+v, want memory 256Mi and the old cpu 200m", mid)
	}
	if err := env.m.updateContainers(context.Background(), pod, changes.ContainersToUpdate[v1.ResourceCPU], v1.ResourceCPU); err != nil {
		t.Fatal(err)
	}
	if env.m.IsPodResizeInProgress(pod, status) {
		t.Error("resize still in progress after both phases")
	}
}

// A running regular init container is resized in place, as the regular
// containers are, while the pod waits for it to finish.
func TestResizeRunningInitContainer(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, func(o *Options) { o.StateDir = t.TempDir() })
	pod := testPod("main")
	pod.Spec.InitContainers = []v1.Container{testContainer("init")}
	pod.Spec.InitContainers[0].Resources = res("25m", "40Mi", "25m", "40Mi")
	if err := env.m.actuated.SetContainer(pod.UID, "init", res("20m", "35Mi", "20m", "35Mi")); err != nil {
		t.Fatal(err)
	}
	ic := &pod.Spec.InitContainers[0]
	status := podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(ic, kubecontainer.StateRunning, 0))
	got := env.m.computePodActions(pod, status, false)
	for _, r := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		if l := got.ContainersToUpdate[r]; len(l) != 1 || l[0].container.Name != "init" {
			t.Errorf("%s updates = %+v, want the init container", r, l)
		}
	}
	if len(got.ContainersToKill) != 0 || len(got.ContainersToStart) != 0 || len(got.InitContainersToStart) != 0 {
		t.Errorf("plan kills %v, starts %v / %v; want nothing but the resize", got.ContainersToKill, got.ContainersToStart, got.InitContainersToStart)
	}
	if !env.m.IsPodResizeInProgress(pod, status) {
		t.Error("IsPodResizeInProgress = false before the update")
	}
}
