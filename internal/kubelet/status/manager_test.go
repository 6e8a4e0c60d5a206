package status

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func testPod(policy v1.RestartPolicy, static bool) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-1", Annotations: map[string]string{}},
		Spec: v1.PodSpec{
			RestartPolicy: policy,
			Containers:    []v1.Container{{Name: "a"}, {Name: "b"}},
		},
	}
	if static {
		p.Annotations[kubecontainer.ConfigSourceAnnotationKey] = kubecontainer.FileSource
	}
	return p
}

func running(name, id string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, ContainerID: id, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func terminated(name string, code int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
}

func newTestManager(t *testing.T) (*Manager, *clocktesting.FakePassiveClock) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	return NewManager(Options{Logger: zaptest.NewLogger(t), Clock: clk}), clk
}

func TestSetPodStatusTransitions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		policy    v1.RestartPolicy
		first     v1.PodStatus
		second    v1.PodStatus
		wantPhase v1.PodPhase
		wantA     string // "running" or "terminated" for container a
	}{
		{
			desc:      "Never: terminated container cannot run again",
			policy:    v1.RestartPolicyNever,
			first:     v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{terminated("a", 0)}},
			second:    v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running("a", "x://1")}},
			wantPhase: v1.PodRunning, wantA: "terminated",
		},
		{
			desc:      "OnFailure: failed container may restart",
			policy:    v1.RestartPolicyOnFailure,
			first:     v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{terminated("a", 1)}},
			second:    v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running("a", "x://1")}},
			wantPhase: v1.PodRunning, wantA: "running",
		},
		{
			desc:      "OnFailure: succeeded container cannot restart",
			policy:    v1.RestartPolicyOnFailure,
			first:     v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{terminated("a", 0)}},
			second:    v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running("a", "x://1")}},
			wantPhase: v1.PodRunning, wantA: "terminated",
		},
		{
			desc:      "Always: restart allowed",
			policy:    v1.RestartPolicyAlways,
			first:     v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{terminated("a", 0)}},
			second:    v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running("a", "x://1")}},
			wantPhase: v1.PodRunning, wantA: "running",
		},
		{
			desc:      "terminal phase stays terminal",
			policy:    v1.RestartPolicyAlways,
			first:     v1.PodStatus{Phase: v1.PodFailed, ContainerStatuses: []v1.ContainerStatus{terminated("a", 1)}},
			second:    v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running("a", "x://1")}},
			wantPhase: v1.PodFailed, wantA: "running",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			m, _ := newTestManager(t)
			pod := testPod(tc.policy, false)
			m.SetPodStatus(pod, tc.first)
			m.SetPodStatus(pod, tc.second)
			got, ok := m.GetPodStatus(pod.UID)
			if !ok {
				t.Fatal("no status")
			}
			if got.Phase != tc.wantPhase {
				t.Errorf("phase = %s, want %s", got.Phase, tc.wantPhase)
			}
			a := findByName(got.ContainerStatuses, "a")
			state := "terminated"
			if a.State.Running != nil {
				state = "running"
			}
			if state != tc.wantA {
				t.Errorf("container a is %s, want %s", state, tc.wantA)
			}
		})
	}
}

func TestConditionTransitionTimesAndStartTime(t *testing.T) {
	t.Parallel()
	m, clk := newTestManager(t)
	pod := testPod(v1.RestartPolicyAlways, true)
	t0 := clk.Now()
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}})
	clk.SetTime(t0.Add(time.Minute))
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse}}})
	got, _ := m.GetPodStatus(pod.UID)
	if !got.Conditions[0].LastTransitionTime.Time.Equal(t0) {
		t.Errorf("unchanged condition moved its transition time to %v", got.Conditions[0].LastTransitionTime)
	}
	clk.SetTime(t0.Add(2 * time.Minute))
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}})
	got, _ = m.GetPodStatus(pod.UID)
	if !got.Conditions[0].LastTransitionTime.Time.Equal(t0.Add(2 * time.Minute)) {
		t.Errorf("changed condition transition time = %v", got.Conditions[0].LastTransitionTime)
	}
	if got.StartTime == nil || !got.StartTime.Time.Equal(t0) {
		t.Errorf("start time = %v, want first seen %v", got.StartTime, t0)
	}
}

func TestObservedGeneration(t *testing.T) {
	t.Parallel()
	resizing := v1.PodCondition{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue, ObservedGeneration: 2}
	for _, tc := range []struct {
		desc          string
		apiGeneration int64 // the API status's observedGeneration (no cached status)
		cached        int64 // a cached status's observedGeneration, 0: none cached
		generation    int64
		want          int64
	}{
		{desc: "first status", generation: 1, want: 1},
		{desc: "the spec changed", cached: 1, generation: 3, want: 3},
		{desc: "never below the cached status", cached: 4, generation: 3, want: 4},
		{desc: "never below the API status", apiGeneration: 5, generation: 3, want: 5},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			m, _ := newTestManager(t)
			pod := testPod(v1.RestartPolicyAlways, false)
			pod.Status.ObservedGeneration = tc.apiGeneration
			if tc.cached != 0 {
				pod.Generation = tc.cached
				m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning})
			}
			pod = pod.DeepCopy()
			pod.Generation = tc.generation
			m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{
				{Type: v1.PodReady, Status: v1.ConditionTrue}, {Type: v1.PodScheduled, Status: v1.ConditionTrue},
				resizing, {Type: "example.com/gate", Status: v1.ConditionTrue, ObservedGeneration: 7},
			}})
			got, _ := m.GetPodStatus(pod.UID)
			if got.ObservedGeneration != tc.want {
				t.Errorf("observedGeneration = %d, want %d", got.ObservedGeneration, tc.want)
			}
			for typ, want := range map[v1.PodConditionType]int64{v1.PodReady: tc.generation, v1.PodScheduled: tc.generation,
				v1.PodResizeInProgress: 2, "example.com/gate": 7} {
				if c := findCondition(got.Conditions, typ); c == nil || c.ObservedGeneration != want {
					t.Errorf("%s = %+v, want observedGeneration %d", typ, c, want)
				}
			}
		})
	}
}

func TestSetContainerReadinessAndStartup(t *testing.T) {
	t.Parallel()
	m, _ := newTestManager(t)
	pod := testPod(v1.RestartPolicyAlways, true)
	st := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running("a", "docker://1"), running("b", "docker://2")}}
	m.SetPodStatus(pod, st)
	// unknown pod and unknown container are ignored
	m.SetContainerReadiness("nope", kubecontainer.ContainerID{Type: "docker", ID: "1"}, true)
	m.SetContainerReadiness(pod.UID, kubecontainer.ContainerID{Type: "docker", ID: "9"}, true)

	m.SetContainerReadiness(pod.UID, kubecontainer.ContainerID{Type: "docker", ID: "1"}, true)
	got, _ := m.GetPodStatus(pod.UID)
	if c := findCondition(got.Conditions, v1.ContainersReady); c == nil || c.Status != v1.ConditionFalse || c.Reason != ContainersNotReady {
		t.Fatalf("ContainersReady = %+v, want False/ContainersNotReady", c)
	}
	m.SetContainerReadiness(pod.UID, kubecontainer.ContainerID{Type: "docker", ID: "2"}, true)
	got, _ = m.GetPodStatus(pod.UID)
	for _, ct := range []v1.PodConditionType{v1.ContainersReady, v1.PodReady} {
		if c := findCondition(got.Conditions, ct); c == nil || c.Status != v1.ConditionTrue {
			t.Errorf("%s = %+v, want True", ct, c)
		}
	}
	m.SetContainerStartup(pod.UID, kubecontainer.ContainerID{Type: "docker", ID: "2"}, true)
	got, _ = m.GetPodStatus(pod.UID)
	if b := findByName(got.ContainerStatuses, "b"); b.Started == nil || !*b.Started {
		t.Errorf("started = %v, want true", b.Started)
	}
}

func TestTerminatePod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		static    bool
		status    v1.PodStatus
		init      bool
		wantPhase v1.PodPhase
		wantCodes map[string]int32 // container -> exit code of its terminated state
	}{
		{
			desc:      "running containers become terminated 137, API pod fails",
			status:    v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running("a", "x://1"), terminated("b", 0)}},
			wantPhase: v1.PodFailed,
			wantCodes: map[string]int32{"a": 137, "b": 0},
		},
		{
			desc:      "static pod keeps its phase",
			static:    true,
			status:    v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running("a", "x://1")}},
			wantPhase: v1.PodRunning,
			wantCodes: map[string]int32{"a": 137},
		},
		{
			desc:      "succeeded stays succeeded",
			status:    v1.PodStatus{Phase: v1.PodSucceeded, ContainerStatuses: []v1.ContainerStatus{terminated("a", 0)}},
			wantPhase: v1.PodSucceeded,
			wantCodes: map[string]int32{"a": 0},
		},
		{
			desc: "uninitialized pod: waiting regular containers stay, started init container terminated",
			init: true,
			status: v1.PodStatus{Phase: v1.PodPending,
				InitContainerStatuses: []v1.ContainerStatus{running("i", "x://i")},
				ContainerStatuses:     []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}}}},
			wantPhase: v1.PodFailed,
			wantCodes: map[string]int32{"i": 137},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			m, _ := newTestManager(t)
			pod := testPod(v1.RestartPolicyAlways, tc.static)
			if tc.init {
				pod.Spec.InitContainers = []v1.Container{{Name: "i"}}
			}
			m.SetPodStatus(pod, tc.status)
			m.TerminatePod(pod)
			got, _ := m.GetPodStatus(pod.UID)
			if got.Phase != tc.wantPhase {
				t.Errorf("phase = %s, want %s", got.Phase, tc.wantPhase)
			}
			all := append(append([]v1.ContainerStatus{}, got.InitContainerStatuses...), got.ContainerStatuses...)
			byName := make(map[string]v1.ContainerStatus, len(all))
			for _, cs := range all {
				byName[cs.Name] = cs
				if _, ok := tc.wantCodes[cs.Name]; !ok && cs.State.Terminated != nil {
					t.Errorf("%s terminated unexpectedly", cs.Name)
				}
			}
			for name, want := range tc.wantCodes {
				cs, ok := byName[name]
				if !ok {
					t.Errorf("no status for container %s, want terminated %d", name, want)
					continue
				}
				if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != want {
					t.Errorf("%s state = %+v, want terminated %d", name, cs.State, want)
					continue
				}
				if want == 137 && cs.State.Terminated.Reason != ContainerReasonStatusUnknown {
					t.Errorf("%s reason = %q", name, cs.State.Terminated.Reason)
				}
			}
		})
	}
}

func TestRemoveOrphanedStatuses(t *testing.T) {
	t.Parallel()
	m, _ := newTestManager(t)
	a, b := testPod(v1.RestartPolicyAlways, true), testPod(v1.RestartPolicyAlways, true)
	b.UID = "uid-2"
	m.SetPodStatus(a, v1.PodStatus{Phase: v1.PodRunning})
	m.SetPodStatus(b, v1.PodStatus{Phase: v1.PodRunning})
	m.RemoveOrphanedStatuses(map[k8stypes.UID]bool{a.UID: true})
	if _, ok := m.GetPodStatus(a.UID); !ok {
		t.Error("kept pod lost its status")
	}
	if _, ok := m.GetPodStatus(b.UID); ok {
		t.Error("orphan status kept")
	}
}

func TestConcurrentAccess(t *testing.T) {
	t.Parallel()
	m, _ := newTestManager(t)
	pod := testPod(v1.RestartPolicyAlways, true)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{running("a", "x://1")}})
				m.SetContainerReadiness(pod.UID, kubecontainer.ContainerID{Type: "x", ID: "1"}, j%2 == 0)
				st, _ := m.GetPodStatus(pod.UID)
				st.ContainerStatuses = nil // mutating the copy must not touch the store
				m.RemoveOrphanedStatuses(map[k8stypes.UID]bool{pod.UID: true})
			}
		}()
	}
	wg.Wait()
	if st, _ := m.GetPodStatus(pod.UID); len(st.ContainerStatuses) != 1 {
		t.Errorf("store mutated through a returned copy: %+v", st)
	}
}
