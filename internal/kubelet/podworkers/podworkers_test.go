package podworkers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func TestCreateSyncsAndResyncs(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "1")})
	if c := h.next(t); c.kind != "sync" || c.uid != "a" || c.updateType != SyncPodCreate {
		t.Fatalf("first call %v, want sync(a,create)", c)
	}
	if !h.w.CouldHaveRunningContainers("a") || h.w.IsPodTerminationRequested("a") {
		t.Error("a syncing pod: want CouldHaveRunningContainers and no termination requested")
	}
	h.idle(t, "a")
	h.step(t, testResync-time.Second)
	h.quiet(t)
	h.clk.Step(time.Second)
	if c := h.next(t); c.kind != "sync" || c.updateType != SyncPodSync {
		t.Fatalf("resync call %v, want sync(a,sync)", c)
	}
}

func TestErrorBacksOff(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.sync.syncPod = func(context.Context, *v1.Pod) (bool, error) { return false, errors.New("boom") }
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "1")})
	h.expect(t, call{kind: "sync", uid: "a"})
	h.idle(t, "a")
	h.step(t, testBackOff-time.Second)
	h.quiet(t)
	h.clk.Step(time.Second)
	h.expect(t, call{kind: "sync", uid: "a"})
}

func TestWaitsForStatusNewerThanLastSync(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "1")})
	h.expect(t, call{kind: "sync", uid: "a"})
	h.idle(t, "a")
	h.step(t, 2*time.Second) // the sync ended at t0
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: newPod("a", "2")})
	h.expect(t, call{kind: "sync", uid: "a", version: "2"})
	asked := h.cache.asked("a")
	if len(asked) != 2 || !asked[0].IsZero() || !asked[1].Equal(t0) {
		t.Errorf("GetNewerThan min times = %v, want [zero, %v]", asked, t0)
	}
}

func TestUpdatesDuringSyncCoalesce(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	release := make(chan struct{})
	h.sync.syncPod = func(ctx context.Context, pod *v1.Pod) (bool, error) {
		if pod.ResourceVersion == "1" {
			<-release
		}
		return false, nil
	}
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "1")})
	h.expect(t, call{kind: "sync", uid: "a", version: "1"})
	for _, v := range []string{"2", "3", "4"} {
		h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: newPod("a", v)})
	}
	close(release)
	if c := h.next(t); c.kind != "sync" || c.version != "4" || c.updateType != SyncPodUpdate {
		t.Fatalf("call after the burst %v, want one sync with version 4", c)
	}
	h.quiet(t)
}

func TestKillGracePeriod(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc  string
		pod   func(*v1.Pod)
		kills []*int64 // overrides of successive kills
		want  int64
	}{
		{desc: "pod's terminationGracePeriodSeconds", kills: []*int64{nil}, want: 30},
		{desc: "override", kills: []*int64{ptr(int64(10))}, want: 10},
		{desc: "override zero becomes one", kills: []*int64{ptr(int64(0))}, want: 1},
		{desc: "deletion grace period", pod: func(p *v1.Pod) { p.DeletionGracePeriodSeconds = ptr(int64(5)) }, kills: []*int64{nil}, want: 5},
		{desc: "smallest of several kills", kills: []*int64{ptr(int64(20)), ptr(int64(7)), ptr(int64(12))}, want: 7},
		{desc: "no grace in spec", pod: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = nil }, kills: []*int64{nil}, want: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			gate := make(chan struct{})
			h.sync.syncPod = func(ctx context.Context, _ *v1.Pod) (bool, error) {
				select {
				case <-gate:
				case <-ctx.Done():
				}
				return false, ctx.Err()
			}
			var mods []func(*v1.Pod)
			if tc.pod != nil {
				mods = append(mods, tc.pod)
			}
			pod := newPod("a", "1", mods...)
			h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "1")})
			h.expect(t, call{kind: "sync", uid: "a"})
			done := make([]chan struct{}, len(tc.kills))
			for i, o := range tc.kills {
				done[i] = make(chan struct{})
				h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod,
					KillPodOptions: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: o, CompletedCh: done[i]}})
			}
			if !h.w.IsPodTerminationRequested("a") {
				t.Error("IsPodTerminationRequested = false after a kill")
			}
			h.expect(t, call{kind: "terminating", uid: "a", grace: tc.want}, call{kind: "terminated", uid: "a"})
			for i, ch := range done {
				select {
				case <-ch:
				case <-time.After(5 * time.Second):
					t.Fatalf("CompletedCh of kill %d not closed", i)
				}
			}
			h.idle(t, "a")
			if !h.w.IsPodKnownTerminated("a") || h.w.CouldHaveRunningContainers("a") || !h.w.ShouldPodRuntimeBeRemoved("a") {
				t.Error("after termination: want known terminated, no running containers, runtime removable")
			}
			if h.w.ShouldPodContentBeRemoved("a") {
				t.Error("ShouldPodContentBeRemoved = true for a killed (not deleted) pod")
			}
			h.quiet(t)
		})
	}
}

func TestShorterGracePeriodInterruptsTermination(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.sync.terminating = func(ctx context.Context, _ *v1.Pod, grace int64) error {
		if grace == 30 {
			return blockUntilCancelled(ctx)
		}
		return nil
	}
	pod := newPod("a", "1")
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	h.expect(t, call{kind: "sync", uid: "a"})
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod})
	h.expect(t, call{kind: "terminating", uid: "a", grace: 30})
	// A longer grace period changes nothing; a shorter one restarts the step.
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr(int64(60))}})
	h.quiet(t)
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &KillPodOptions{PodTerminationGracePeriodSecondsOverride: ptr(int64(2))}})
	h.expect(t, call{kind: "terminating", uid: "a", grace: 2}, call{kind: "terminated", uid: "a"})
}

func TestKillDuringCreation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		// blockStatus holds the worker in GetNewerThan instead of SyncPod.
		blockStatus bool
		wantSync    bool
	}{
		{desc: "while SyncPod runs", wantSync: true},
		{desc: "while waiting for the first status", blockStatus: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.sync.syncPod = func(ctx context.Context, _ *v1.Pod) (bool, error) { return false, blockUntilCancelled(ctx) }
			gate := make(chan struct{})
			if tc.blockStatus {
				h.cache.block["a"] = gate
			}
			pod := newPod("a", "1")
			h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
			if tc.wantSync {
				h.expect(t, call{kind: "sync", uid: "a"})
			} else {
				waitFor(t, func() bool { return len(h.cache.asked("a")) == 1 })
			}
			done := make(chan struct{})
			h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod, KillPodOptions: &KillPodOptions{CompletedCh: done}})
			close(gate)
			h.expect(t, call{kind: "terminating", uid: "a", grace: 30}, call{kind: "terminated", uid: "a"})
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("CompletedCh not closed")
			}
		})
	}
}

func TestTerminalPodTerminatesWithoutKill(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		pod      *v1.Pod
		terminal bool // SyncPod reports isTerminal
		wantSync bool
		deleted  bool
	}{
		{desc: "SyncPod reports terminal", pod: newPod("a", "1"), terminal: true, wantSync: true},
		{desc: "pod arrives in phase Succeeded", pod: newPod("a", "1", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded })},
		{desc: "pod arrives in phase Failed", pod: newPod("a", "1", func(p *v1.Pod) { p.Status.Phase = v1.PodFailed })},
		{desc: "pod arrives deleted", pod: newPod("a", "1", func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: t0} }), deleted: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.sync.syncPod = func(context.Context, *v1.Pod) (bool, error) { return tc.terminal, nil }
			h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: tc.pod})
			if tc.wantSync {
				h.expect(t, call{kind: "sync", uid: "a"})
			}
			h.expect(t, call{kind: "terminating", uid: "a", grace: 30}, call{kind: "terminated", uid: "a"})
			h.idle(t, "a")
			if !h.w.IsPodKnownTerminated("a") || !h.w.ShouldPodBeFinished("a") || !h.w.ShouldPodContainersBeTerminating("a") {
				t.Error("want the pod known terminated and finished")
			}
			if got := h.w.ShouldPodContentBeRemoved("a"); got != tc.deleted {
				t.Errorf("ShouldPodContentBeRemoved = %v, want %v", got, tc.deleted)
			}
			// A finished UID never runs again.
			h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: newPod("a", "2")})
			done := make(chan struct{})
			h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: tc.pod, KillPodOptions: &KillPodOptions{CompletedCh: done}})
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("CompletedCh of a kill on a finished pod not closed")
			}
			h.clk.Step(time.Hour)
			h.quiet(t)
		})
	}
}

func TestCompletedChClosedForNonKill(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	done := make(chan struct{})
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "1"), KillPodOptions: &KillPodOptions{CompletedCh: done}})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("CompletedCh of a create not closed")
	}
	h.expect(t, call{kind: "sync", uid: "a"})
}

func TestConcurrentPodsAreIndependent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.sync.syncPod = func(ctx context.Context, pod *v1.Pod) (bool, error) {
		if pod.UID == "slow" {
			return false, blockUntilCancelled(ctx)
		}
		return false, nil
	}
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("slow", "1")})
	h.expect(t, call{kind: "sync", uid: "slow"})
	for _, uid := range []string{"b", "c"} {
		h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod(uid, "1")})
	}
	seen := map[k8stypes.UID]bool{}
	for range 2 {
		seen[h.next(t).uid] = true
	}
	if !seen["b"] || !seen["c"] {
		t.Errorf("synced %v while slow blocks, want b and c", seen)
	}
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: newPod("b", "1")})
	h.expect(t, call{kind: "terminating", uid: "b"}, call{kind: "terminated", uid: "b"})
	if h.w.IsPodTerminationRequested("c") || h.w.IsPodTerminationRequested("slow") {
		t.Error("killing b affected another pod")
	}
}

func TestOrphanedRuntimePod(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	rp := &kubecontainer.Pod{ID: "orphan", Name: "old", Namespace: "ns"}
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, RunningPod: rp})
	h.quiet(t) // runtime pods can only be killed
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: rp})
	c := h.next(t)
	if c.kind != "terminating" || c.uid != "orphan" || c.grace != 1 {
		t.Fatalf("call %v, want terminating(orphan) with grace 1", c)
	}
	// Forgotten at once: no terminated step, no state kept.
	waitFor(t, func() bool { h.w.mu.Lock(); defer h.w.mu.Unlock(); return len(h.w.pods) == 0 })
	h.quiet(t)
}

func TestRuntimeKillOfKnownPodUsesItsSpec(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "7")})
	h.expect(t, call{kind: "sync", uid: "a"})
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: &kubecontainer.Pod{ID: "a", Name: "p-a", Namespace: "ns"}})
	h.expect(t, call{kind: "terminating", uid: "a", version: "7", grace: 30}, call{kind: "terminated", uid: "a", version: "7"})
	h.idle(t, "a")
	if !h.w.ShouldPodContentBeRemoved("a") {
		t.Error("an orphaned pod counts as deleted: want content removable")
	}
}

func TestEffectiveGracePeriod(t *testing.T) {
	t.Parallel()
	pod := newPod("a", "1")
	for _, tc := range []struct {
		desc          string
		current       int64
		pod           *v1.Pod
		override      *int64
		want          int64
		wantShortened bool
	}{
		{desc: "spec", pod: pod, want: 30},
		{desc: "nil pod", want: 1},
		{desc: "override larger than spec", pod: pod, override: ptr(int64(60)), want: 60},
		{desc: "current kept against larger", current: 10, pod: pod, override: ptr(int64(20)), want: 10},
		{desc: "shortened", current: 10, pod: pod, override: ptr(int64(3)), want: 3, wantShortened: true},
		{desc: "same is not shortened", current: 10, pod: pod, override: ptr(int64(10)), want: 10},
		{desc: "negative clamps", pod: pod, override: ptr(int64(-5)), want: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, shortened := effectiveGracePeriod(tc.current, tc.pod, tc.override)
			if got != tc.want || shortened != tc.wantShortened {
				t.Errorf("effectiveGracePeriod = %d, %v; want %d, %v", got, shortened, tc.want, tc.wantShortened)
			}
		})
	}
}

func TestStopInterruptsAndWaits(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.sync.syncPod = func(ctx context.Context, _ *v1.Pod) (bool, error) { return false, blockUntilCancelled(ctx) }
	h.cache.block["waiting"] = make(chan struct{})
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("busy", "1")})
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("waiting", "1")})
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("idle", "1", func(p *v1.Pod) { p.Name = "idle" })})
	seen := map[k8stypes.UID]bool{}
	for range 2 {
		seen[h.next(t).uid] = true
	}
	if !seen["busy"] || !seen["idle"] {
		t.Fatalf("synced %v, want busy and idle", seen)
	}
	stopped := make(chan struct{})
	go func() {
		h.w.Stop()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop did not return")
	}
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("late", "1")})
	h.w.mu.Lock()
	_, late := h.w.pods["late"]
	h.w.mu.Unlock()
	if late {
		t.Error("an update after Stop started a worker")
	}
}

// TestWorkerDurationMetric: each unit of work is observed under its update
// type, the resync as "sync", the work that finishes the pod as
// "terminated" (upstream's labels).
func TestWorkerDurationMetric(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "1")})
	h.expect(t, call{kind: "sync", uid: "a"})
	h.idle(t, "a")
	h.step(t, testResync)
	h.expect(t, call{kind: "sync", uid: "a"})
	h.idle(t, "a")
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: newPod("a", "1")})
	h.expect(t, call{kind: "terminating", uid: "a"})
	h.expect(t, call{kind: "terminated", uid: "a"})
	deadline := time.Now().Add(5 * time.Second)
	for sampleCounts(t, h.reg)["terminated"] != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := sampleCounts(t, h.reg); got["create"] != 1 || got["sync"] != 1 || got["kill"] != 1 {
		t.Errorf("kubelet_pod_worker_duration_seconds samples by operation_type = %v, want create, sync, kill and terminated once", got)
	}
}

func sampleCounts(t *testing.T, reg *prometheus.Registry) map[string]uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "kubelet_pod_worker_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	return out
}
