package stats

import (
	"context"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// setShimLikeStats makes the fake runtime report, like the dockershim, only ready
// sandboxes and running containers in ListPodSandboxStats: web (sb1) with app and
// side, and db's sandbox (sb2) without its exited container.
func (e *testEnv) setShimLikeStats(t *testing.T) {
	t.Helper()
	st, err := e.rt.ListPodSandboxStats(context.Background(), &runtimeapi.PodSandboxStatsFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.GetAttributes().GetId() == "sb2" {
			s.Linux.Containers = nil
		}
	}
	e.rt.SetFakePodSandboxStats(st)
}

// listsSince returns the runtime calls made since the previous call of it.
func listsSince(rt *critest.FakeRuntimeService, seen *int) map[string]int {
	calls := rt.GetCalls()
	out := map[string]int{}
	for _, c := range calls[*seen:] {
		out[c]++
	}
	*seen = len(calls)
	return out
}

// TestSummaryReusesLists: with a runtime that reports only running objects in
// ListPodSandboxStats, the sandbox and container lists are asked once and reused
// until a new object shows up in the stats or runtimeListTTL passes; a container that
// stops leaves the summary at once.
func TestSummaryReusesLists(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.setShimLikeStats(t)
	var mu sync.Mutex
	now := time.Now()
	e.p.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ctx := context.Background()
	seen := len(e.rt.GetCalls())
	summary := func(desc string, wantLists int, wantContainers int) {
		t.Helper()
		s, err := e.p.Summary(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		calls := listsSince(e.rt, &seen)
		if calls["ListPodSandbox"] != wantLists || calls["ListContainers"] != wantLists || calls["ListPodSandboxStats"] != 1 {
			t.Errorf("%s: calls %v, want %d of each list and one ListPodSandboxStats", desc, calls, wantLists)
		}
		n := 0
		for _, p := range s.Pods {
			n += len(p.Containers)
		}
		if len(s.Pods) != 2 || n != wantContainers {
			t.Errorf("%s: %d pods with %d containers, want 2 with %d", desc, len(s.Pods), n, wantContainers)
		}
	}
	summary("first", 1, 2)
	summary("second", 0, 2)
	summary("third", 0, 2)

	// side stops: the runtime leaves it out of the stats; no list is needed.
	st, _ := e.rt.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
	seen++
	for _, s := range st {
		if s.GetAttributes().GetId() == "sb1" {
			s.Linux.Containers = s.Linux.Containers[:1]
		}
	}
	e.rt.SetFakePodSandboxStats(st)
	summary("side stopped", 0, 1)

	// A new container shows up in the stats: listed at once.
	e.rt.SetFakeContainers(append([]*critest.FakeContainer{
		container("c4", "sb1", "new", runtimeapi.ContainerState_CONTAINER_RUNNING, t1),
	}, e.rt.Containers["c1"]))
	for _, s := range st {
		if s.GetAttributes().GetId() == "sb1" {
			s.Linux.Containers = append(s.Linux.Containers, &runtimeapi.ContainerStats{
				Attributes: &runtimeapi.ContainerAttributes{Id: "c4", Metadata: &runtimeapi.ContainerMetadata{Name: "new"}}})
		}
	}
	e.rt.SetFakePodSandboxStats(st)
	summary("new container", 1, 2)
	summary("quiet again", 0, 2)

	mu.Lock()
	now = now.Add(runtimeListTTL)
	mu.Unlock()
	summary("after the TTL", 1, 2)
}

// TestSummaryListsWhenStatsIncludeStopped: a runtime whose ListPodSandboxStats also
// reports stopped containers (db's exited one) is listed at every Summary, as the
// running filter needs fresh lists.
func TestSummaryListsWhenStatsIncludeStopped(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	seen := 0
	for i := range 3 {
		s, err := e.p.Summary(context.Background(), true)
		if err != nil {
			t.Fatal(err)
		}
		if calls := listsSince(e.rt, &seen); calls["ListPodSandbox"] != 1 || calls["ListContainers"] != 1 {
			t.Errorf("summary %d: calls %v, want both lists", i, calls)
		}
		for _, p := range s.Pods {
			if p.PodRef.Name == "db" && len(p.Containers) != 0 {
				t.Errorf("summary %d: db reports its exited container", i)
			}
		}
	}
}
