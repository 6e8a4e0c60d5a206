package eviction

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// waitFor polls cond for up to 10s of real time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRunWithoutWorkReturns(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{}, false)
	done := make(chan struct{})
	go func() { e.m.run(context.Background(), e.deps); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run without thresholds nor local storage isolation did not return")
	}
	if node, _ := e.stats.calls(); node != 0 {
		t.Errorf("NodeStats called %d times", node)
	}
}

func TestRunLoop(t *testing.T) {
	t.Parallel()
	p := newPod("p")
	e := newEnv(t, Options{Thresholds: hardMemory(t, "1Gi")}, false, p)
	var cleaned atomic.Bool
	var cleanupChecks atomic.Int32
	e.deps.PodCleanedUp = func(*v1.Pod) bool { cleanupChecks.Add(1); return cleaned.Load() }
	e.memSample(500*mi, podMem(p, gi))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	e.m.opts.Deps = e.deps
	if err := e.m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { e.m.Wait(); close(done) }()
	nodeCalls := func() int { n, _ := e.stats.calls(); return n }

	// The first pass evicts, then Run polls for the pod's cleanup every second.
	waitFor(t, "the eviction", func() bool { return len(e.killer.killed()) == 1 })
	waitFor(t, "the cleanup poll", func() bool { return e.clock.HasWaiters() })
	checks := cleanupChecks.Load()
	e.clock.Step(time.Second)
	waitFor(t, "a second cleanup check", func() bool { return cleanupChecks.Load() > checks })
	if n := nodeCalls(); n != 1 {
		t.Errorf("NodeStats calls while waiting for cleanup = %d, want 1", n)
	}

	// Once cleaned up, the next pass runs at once; its sample is stale.
	cleaned.Store(true)
	waitFor(t, "the cleanup poll", func() bool { return e.clock.HasWaiters() })
	e.clock.Step(time.Second)
	waitFor(t, "the pass after cleanup", func() bool { return nodeCalls() == 2 })
	if got := e.killer.killed(); len(got) != 1 {
		t.Errorf("killed %q on a stale sample", got)
	}

	// Then it waits for the monitoring interval, or a wake-up.
	waitFor(t, "the interval wait", func() bool { return e.clock.HasWaiters() })
	e.clock.Step(10 * time.Second)
	waitFor(t, "the pass after the interval", func() bool { return nodeCalls() == 3 })
	waitFor(t, "the interval wait", func() bool { return e.clock.HasWaiters() })
	e.m.wake <- struct{}{}
	waitFor(t, "the pass after a wake-up", func() bool { return nodeCalls() == 4 })

	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not end with its context")
	}
}

// TestStartNeedsDeps: a manager with work does not start without the parts
// it acts through; one without work starts nothing and needs none.
func TestStartNeedsDeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, Options{Thresholds: hardMemory(t, "1Gi")}, false)
	if err := e.m.Start(context.Background()); err == nil {
		t.Error("Start without Deps: no error")
	}
	idle := newEnv(t, Options{}, false)
	if err := idle.m.Start(context.Background()); err != nil {
		t.Errorf("Start without work: %v", err)
	}
	idle.m.Wait()
}

func TestSetCondition(t *testing.T) {
	t.Parallel()
	old := t0.Add(-time.Hour)
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
	for _, tc := range []struct {
		desc     string
		existing []v1.PodCondition
		wantTime time.Time
	}{
		{desc: "added", existing: []v1.PodCondition{ready}, wantTime: t0},
		{desc: "same status keeps its transition time", wantTime: old, existing: []v1.PodCondition{ready,
			{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, LastTransitionTime: metaTime(old)}}},
		{desc: "status change", wantTime: t0, existing: []v1.PodCondition{ready,
			{Type: v1.DisruptionTarget, Status: v1.ConditionFalse, LastTransitionTime: metaTime(old)}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			st := &v1.PodStatus{Conditions: append([]v1.PodCondition{}, tc.existing...)}
			setCondition(st, v1.PodCondition{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "TerminationByKubelet",
				LastTransitionTime: metaTime(t0)})
			if len(st.Conditions) != 2 || st.Conditions[0] != ready {
				t.Fatalf("conditions = %+v", st.Conditions)
			}
			c := st.Conditions[1]
			if c.Type != v1.DisruptionTarget || c.Reason != "TerminationByKubelet" || !c.LastTransitionTime.Time.Equal(tc.wantTime) {
				t.Errorf("condition = %+v, want transition time %v", c, tc.wantTime)
			}
		})
	}
}
