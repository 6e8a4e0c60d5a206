package nodeshutdown

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"
)

type byPrio = kubeletv1beta1.ShutdownGracePeriodByPodPriority

func TestShutdownGroups(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc            string
		grace, critical time.Duration
		byPriority      []byPrio
		want            []byPrio
		wantTotal       time.Duration
	}{
		{desc: "disabled"},
		{desc: "critical longer than the whole", grace: 10 * time.Second, critical: 11 * time.Second},
		{
			desc: "two groups", grace: 30 * time.Second, critical: 10 * time.Second,
			want:      []byPrio{{Priority: 0, ShutdownGracePeriodSeconds: 20}, {Priority: 2000000000, ShutdownGracePeriodSeconds: 10}},
			wantTotal: 30 * time.Second,
		},
		{
			desc: "no critical period", grace: 30 * time.Second,
			want:      []byPrio{{Priority: 0, ShutdownGracePeriodSeconds: 30}, {Priority: 2000000000, ShutdownGracePeriodSeconds: 0}},
			wantTotal: 30 * time.Second,
		},
		{
			desc: "by priority wins and is sorted", grace: 30 * time.Second, critical: 10 * time.Second,
			byPriority: []byPrio{{Priority: 100000, ShutdownGracePeriodSeconds: 10}, {Priority: 0, ShutdownGracePeriodSeconds: 60}, {Priority: 1000, ShutdownGracePeriodSeconds: 5}},
			want:       []byPrio{{Priority: 0, ShutdownGracePeriodSeconds: 60}, {Priority: 1000, ShutdownGracePeriodSeconds: 5}, {Priority: 100000, ShutdownGracePeriodSeconds: 10}},
			wantTotal:  75 * time.Second,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			in := slices.Clone(tc.byPriority)
			got := shutdownGroups(tc.grace, tc.critical, in)
			if !slices.Equal(got, tc.want) {
				t.Errorf("groups = %+v, want %+v", got, tc.want)
			}
			if !slices.Equal(in, tc.byPriority) {
				t.Errorf("the configured slice was reordered: %+v", in)
			}
			if total := totalGracePeriod(got); total != tc.wantTotal {
				t.Errorf("total = %v, want %v", total, tc.wantTotal)
			}
		})
	}
}

func TestGroupPods(t *testing.T) {
	t.Parallel()
	groups := []byPrio{{Priority: 0, ShutdownGracePeriodSeconds: 1}, {Priority: 1000, ShutdownGracePeriodSeconds: 2}, {Priority: 100000, ShutdownGracePeriodSeconds: 3}}
	pods := []*v1.Pod{
		testPod("negative", ptr[int32](-5), nil),
		testPod("none", nil, nil),
		testPod("zero", ptr[int32](0), nil),
		testPod("between", ptr[int32](500), nil),
		testPod("boundary", ptr[int32](1000), nil),
		testPod("high", ptr[int32](99999), nil),
		testPod("top", ptr[int32](2000000000), nil),
	}
	var got [][]string
	for _, g := range groupPods(groups, pods) {
		var names []string
		for _, p := range g.pods {
			names = append(names, p.Name)
		}
		got = append(got, names)
	}
	want := [][]string{{"negative", "none", "zero", "between"}, {"boundary", "high"}, {"top"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("groups = %q, want %q", got, want)
	}
}

func TestKillPodsByPodPriority(t *testing.T) {
	t.Parallel()
	k := &fakeKubelet{pods: []*v1.Pod{
		testPod("top", ptr[int32](200000), ptr[int64](30)),
		testPod("mid", ptr[int32](1000), ptr[int64](1)),
		testPod("low", nil, nil),
	}}
	m := mustNew(t, Options{
		ByPodPriority: []byPrio{{Priority: 100000, ShutdownGracePeriodSeconds: 10}, {Priority: 0, ShutdownGracePeriodSeconds: 20}, {Priority: 1000, ShutdownGracePeriodSeconds: 5}},
		ActivePods:    k.activePods, KillPod: k.killPod, StateDir: t.TempDir(), Logger: zaptest.NewLogger(t),
	})
	if err := m.killPods(context.Background(), k.activePods()); err != nil {
		t.Fatal(err)
	}
	type kill struct {
		pod   string
		grace int64
	}
	var got []kill
	for _, r := range k.killed() {
		got = append(got, kill{pod: r.pod, grace: r.grace})
	}
	want := []kill{{pod: "low", grace: 20}, {pod: "mid", grace: 1}, {pod: "top", grace: 10}}
	if !slices.Equal(got, want) {
		t.Errorf("kills = %+v, want %+v", got, want)
	}
}

func TestKillPodsGroupTimeout(t *testing.T) {
	t.Parallel()
	clock := clocktesting.NewFakeClock(time.Now())
	stuck := make(chan struct{})
	defer close(stuck)
	k := &fakeKubelet{
		pods:  []*v1.Pod{testPod("stuck", nil, nil), testPod("critical", ptr[int32](2000000000), nil)},
		block: map[string]chan struct{}{"stuck": stuck},
	}
	m := mustNew(t, Options{
		ShutdownGracePeriod: 30 * time.Second, ShutdownGracePeriodCriticalPods: 10 * time.Second,
		ActivePods: k.activePods, KillPod: k.killPod, StateDir: t.TempDir(), Logger: zaptest.NewLogger(t), Clock: clock,
	})
	done := make(chan error, 1)
	go func() { done <- m.killPods(context.Background(), k.activePods()) }()
	if !waitFor(clock.HasWaiters, 5*time.Second) {
		t.Fatal("no group timer")
	}
	// The group's kills run in their own goroutines.
	if !waitFor(func() bool { return len(k.killed()) == 1 }, 5*time.Second) {
		t.Fatalf("killed %q, want the first group's pod", k.killedNames())
	}
	clock.Step(19 * time.Second)
	time.Sleep(20 * time.Millisecond)
	if names := k.killedNames(); !slices.Equal(names, []string{"stuck"}) {
		t.Fatalf("killed %q before the first group's period ended", names)
	}
	clock.Step(time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("killPods did not go on after the first group's period")
	}
	if names := k.killedNames(); !slices.Equal(names, []string{"stuck", "critical"}) {
		t.Errorf("killed %q", names)
	}
}

func TestShutdownStatusKeepsSucceededAndTransitionTime(t *testing.T) {
	t.Parallel()
	old := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	pod := testPod("done", nil, nil)
	st := v1.PodStatus{
		Phase: v1.PodSucceeded,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReady, Status: v1.ConditionFalse},
			{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, LastTransitionTime: old, Reason: "Other"},
		},
	}
	shutdownStatus(pod, time.Now)(&st)
	if st.Phase != v1.PodSucceeded || st.Reason != "Terminated" {
		t.Errorf("phase %s reason %q, want Succeeded and Terminated", st.Phase, st.Reason)
	}
	if len(st.Conditions) != 2 {
		t.Fatalf("conditions = %+v", st.Conditions)
	}
	c := st.Conditions[1]
	if c.Reason != "TerminationByKubelet" || !c.LastTransitionTime.Equal(&old) || c.ObservedGeneration != 3 {
		t.Errorf("DisruptionTarget = %+v, want upstream's with the old transition time", c)
	}
}
