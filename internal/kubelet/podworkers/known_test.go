package podworkers

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
)

func TestSyncKnownPods(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// Before the first SyncKnownPods, unknown pods may still be running.
	if !h.w.CouldHaveRunningContainers("unknown") || h.w.ShouldPodRuntimeBeRemoved("unknown") || h.w.ShouldPodContentBeRemoved("unknown") {
		t.Error("before SyncKnownPods: an unknown pod must count as possibly running")
	}
	running, finished, orphan := newPod("running", "1"), newPod("finished", "1"), newPod("orphan", "1")
	for _, p := range []*v1.Pod{running, finished, orphan} {
		h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: p})
	}
	for range 3 {
		h.next(t)
	}
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: finished})
	h.expect(t, call{kind: "terminating", uid: "finished"}, call{kind: "terminated", uid: "finished"})
	h.idle(t, "finished")

	// "finished" stays known (and ignored) while desired.
	got := h.w.SyncKnownPods([]*v1.Pod{running, finished, orphan})
	want := map[k8stypes.UID]PodWorkerSync{
		"running":  {State: SyncPod, HasConfig: true},
		"finished": {State: TerminatedPod, HasConfig: true},
		"orphan":   {State: SyncPod, HasConfig: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SyncKnownPods = %+v, want %+v", got, want)
	}

	// Once not desired, the finished pod is forgotten and the running orphan terminated.
	got = h.w.SyncKnownPods([]*v1.Pod{running})
	want = map[k8stypes.UID]PodWorkerSync{
		"running": {State: SyncPod, HasConfig: true},
		"orphan":  {State: TerminatingPod, HasConfig: true, Orphan: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("SyncKnownPods = %+v, want %+v", got, want)
	}
	h.expect(t, call{kind: "terminating", uid: "orphan", grace: 30}, call{kind: "terminated", uid: "orphan"})
	h.idle(t, "orphan")
	if !h.w.ShouldPodContentBeRemoved("orphan") {
		t.Error("a terminated orphan: want content removable")
	}
	got = h.w.SyncKnownPods([]*v1.Pod{running})
	if _, ok := got["orphan"]; ok || len(got) != 1 {
		t.Errorf("SyncKnownPods = %+v, want only running", got)
	}
	// After SyncKnownPods, unknown pods are known not to run.
	for _, uid := range []k8stypes.UID{"finished", "orphan", "never-seen"} {
		if h.w.CouldHaveRunningContainers(uid) || !h.w.ShouldPodRuntimeBeRemoved(uid) || !h.w.ShouldPodContentBeRemoved(uid) {
			t.Errorf("%s: after SyncKnownPods an unknown pod must count as gone", uid)
		}
	}
	// A forgotten UID may start again.
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: finished})
	h.expect(t, call{kind: "sync", uid: "finished"})
}

func TestSyncKnownPodsDropsUnstartedOrphan(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.cache.block["a"] = make(chan struct{}) // never answers: the pod stays unsynced
	h.sync.syncPod = func(ctx context.Context, _ *v1.Pod) (bool, error) { return false, blockUntilCancelled(ctx) }
	// Static pods with one full name: the second waits and never starts.
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "1", static)})
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("b", "1", static)})
	waitFor(t, func() bool { return len(h.cache.asked("a")) == 1 })
	h.idle(t, "b")
	got := h.w.SyncKnownPods([]*v1.Pod{newPod("a", "1", static)})
	if _, ok := got["b"]; ok {
		t.Errorf("SyncKnownPods kept the never-started orphan b: %+v", got)
	}
	h.quiet(t)
}

func TestRestartWithSameUID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	release := make(chan struct{})
	h.sync.terminating = func(ctx context.Context, _ *v1.Pod, _ int64) error {
		<-release
		return nil
	}
	pod := newPod("a", "1")
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod})
	h.expect(t, call{kind: "sync", uid: "a"})
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: pod})
	h.expect(t, call{kind: "terminating", uid: "a"})
	// A create while terminating is remembered, not run.
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "2")})
	close(release)
	h.expect(t, call{kind: "terminated", uid: "a", version: "1"})
	h.idle(t, "a")
	h.quiet(t)
	// Still desired, but the restart request lets SyncKnownPods forget it...
	if got := h.w.SyncKnownPods([]*v1.Pod{pod}); len(got) != 0 {
		t.Errorf("SyncKnownPods = %+v, want the restarted UID forgotten", got)
	}
	// ...so the caller's next create starts it again.
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("a", "2")})
	h.expect(t, call{kind: "sync", uid: "a", version: "2"})
}

func TestStaticPodsWithSameNameRunOneAtATime(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	older, newer := newPod("old", "1", static), newPod("new", "1", static)
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: older})
	h.expect(t, call{kind: "sync", uid: "old"})
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newer})
	h.idle(t, "new")
	h.quiet(t)
	if !h.w.CouldHaveRunningContainers("new") {
		t.Error("a waiting pod is known: CouldHaveRunningContainers must be true")
	}
	// The manifest changed: the old UID is killed; the new one starts once it finished.
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: older})
	h.expect(t,
		call{kind: "terminating", uid: "old"},
		call{kind: "terminated", uid: "old"},
		call{kind: "sync", uid: "new"},
	)
	// A different name is not held up.
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("other", "1", static, func(p *v1.Pod) { p.Name = "other" })})
	h.expect(t, call{kind: "sync", uid: "other"})
}

func TestWaitingStaticPodKilledNeverStarts(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: newPod("old", "1", static)})
	h.expect(t, call{kind: "sync", uid: "old"})
	waiting := newPod("new", "1", static)
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: waiting})
	done := make(chan struct{})
	h.w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: waiting, KillPodOptions: &KillPodOptions{CompletedCh: done}})
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("CompletedCh of the never-started pod not closed")
	}
	h.quiet(t)
	if !h.w.IsPodKnownTerminated("new") || !h.w.ShouldPodBeFinished("new") {
		t.Error("a pod killed before it started: want terminated and finished")
	}
}
