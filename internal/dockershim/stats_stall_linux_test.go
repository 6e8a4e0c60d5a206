package dockershim

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// TestStatsStalledInspect: a container whose inspect Docker never answers (its
// storage hangs) is listed without usage once the inspect timeout passes, and the
// next requests neither inspect it again nor wait, until statsSizeTTL; it used to
// hold the whole list (and the kubelet's /stats/summary) until the caller's
// deadline, then drop the container.
func TestStatsStalledInspect(t *testing.T) {
	t.Parallel()
	procRoot, _ := statsTestProc(t)
	f := &statsFakeDocker{
		containers: map[string]libdocker.ContainerJSON{
			"sb": statsFakeContainer("sb", typeSandbox, "", 42, 0, "", nil),
			"c1": statsFakeContainer("c1", typeContainer, "sb", 42, 1, "", nil),
		},
		release: make(chan struct{}), // every inspect hangs
	}
	s := statsTestService(t, f)
	s.stats.cgroups = newCgroupReader(procRoot)
	s.stats.inspectTimeout = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // the kubelet's request deadline
	defer cancel()

	list := func() []*runtimeapi.ContainerStats {
		t.Helper()
		start := time.Now()
		resp, err := s.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 3*time.Second { // the request's deadline is 5 s
			t.Fatalf("ListContainerStats took %v behind a stalled inspect", d)
		}
		return resp.Stats
	}
	for i := range 3 {
		st := list()
		if len(st) != 1 || st[0].GetAttributes().GetId() != "c1" {
			t.Fatalf("request %d: %v, want c1 listed", i, st)
		}
		if st[0].Cpu != nil || st[0].Memory != nil {
			t.Errorf("request %d: c1 has usage %v without an inspect", i, st[0])
		}
	}
	f.mu.Lock()
	calls := f.sizeCalls
	f.mu.Unlock()
	if calls != 1 {
		t.Errorf("%d inspects for 3 requests, want 1 (a stalled container is not asked again within the TTL)", calls)
	}
}
