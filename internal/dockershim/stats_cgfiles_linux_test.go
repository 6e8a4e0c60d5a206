package dockershim

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/waitfor"
)

// TestStatsCgroupFiles: the shim's reader goes through cgroups.HeldFiles
// (tested there in full): a sample equals a fresh read, its files stay held
// until released or pruned, and a removed cgroup reads as errCgroupGone.
func TestStatsCgroupFiles(t *testing.T) {
	t.Parallel()
	cg := cgroups.Paths{V2: true, Unified: filepath.Join(t.TempDir(), "c")}
	fstest.WriteTree(t, cg.Unified, map[string]string{
		"cpu.stat": "usage_usec 2500\n", "memory.current": "500\n", "memory.max": "max\n",
		"memory.stat": "inactive_file 100\n", "pids.current": "4\n",
	})
	now := time.Unix(100, 0)
	r := newCgroupReader("/proc")
	want, err := readCgroupSample(cg, now)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // opened, then held
		if got, err := r.read(cg, now); err != nil || got != want {
			t.Fatalf("held files: %+v, %v; a fresh read: %+v", got, err, want)
		}
	}
	if r.files.Held() == 0 {
		t.Fatal("no file held after a read")
	}
	r.release(cg)
	if n := r.files.Held(); n != 0 {
		t.Errorf("after release: %d files held, want 0", n)
	}
	if _, err := r.read(cg, now); err != nil {
		t.Fatal(err)
	}
	r.pruneFiles(now.Add(time.Second))
	if n := r.files.Held(); n != 0 {
		t.Errorf("after pruning: %d files held, want 0", n)
	}
	if err := os.RemoveAll(cg.Unified); err != nil {
		t.Fatal(err)
	}
	if _, err := r.read(cg, now); !errors.Is(err, errCgroupGone) {
		t.Errorf("removed cgroup: err = %v, want errCgroupGone", err)
	}
}

// TestStatsFollowsEvents runs the list stats RPCs with a followed event stream: the
// Docker list is reused while nothing happens, a die event drops the container at the
// next request and closes its cgroup files, a broken stream makes every request list.
func TestStatsFollowsEvents(t *testing.T) {
	t.Parallel()
	procRoot, _ := statsTestProc(t)
	f := &statsFakeDocker{containers: map[string]libdocker.ContainerJSON{
		"sb": statsFakeContainer("sb", typeSandbox, "", 42, 0, "", nil),
		"c1": statsFakeContainer("c1", typeContainer, "sb", 42, 1, "", nil),
	}}
	s := statsTestService(t, f)
	src := newEventsFakeSource(1)
	s.events = newEventBroker(src, zaptest.NewLogger(t))
	s.stats.cgroups = newCgroupReader(procRoot)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); s.events.Wait() }()
	s.events.Start(ctx)
	<-src.next // subscribed; the broker marks the stream live just after
	waitfor.Condition(t, func() bool { s.events.mu.Lock(); defer s.events.mu.Unlock(); return s.events.live })
	lists := func() int { f.mu.Lock(); defer f.mu.Unlock(); return f.listCalls }
	podStats := func() *runtimeapi.PodSandboxStats {
		t.Helper()
		r, err := s.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
		if err != nil || len(r.Stats) != 1 {
			t.Fatalf("ListPodSandboxStats = %v, %v; want one sandbox", r, err)
		}
		return r.Stats[0]
	}
	waitInvalid := func() {
		t.Helper()
		waitfor.Condition(t, func() bool {
			s.stats.index.mu.Lock()
			defer s.stats.index.mu.Unlock()
			return s.stats.index.gen != s.stats.index.listedGen
		})
	}

	for i := range 3 {
		if st := podStats(); len(st.Linux.Containers) != 1 {
			t.Fatalf("request %d: containers %v, want c1", i, st.Linux.Containers)
		}
	}
	if n := lists(); n != 1 {
		t.Errorf("%d Docker lists for 3 quiet requests, want 1", n)
	}
	if s.stats.cgroups.files.Held() == 0 {
		t.Error("no cgroup file is held open between requests")
	}

	// c1 stops outside the shim.
	f.mu.Lock()
	f.containers["c1"] = statsFakeContainer("c1", typeContainer, "sb", 0, 1, "", nil)
	f.mu.Unlock()
	src.subs[0].msgs <- eventsMsg("die", "c1", map[string]string{labelType: typeContainer}, 100, 0)
	waitInvalid()
	if st := podStats(); len(st.Linux.Containers) != 0 || lists() != 2 {
		t.Errorf("after c1 died: containers %v after %d lists; want none after 2", st.Linux.Containers, lists())
	}
	// The observer invalidates the index first, then forgets the container.
	waitfor.Condition(t, func() bool { // c1's pid is forgotten after it died
		s.stats.mu.Lock()
		defer s.stats.mu.Unlock()
		return s.stats.entries["c1"].pid == 0
	})
	src.subs[0].msgs <- eventsMsg("destroy", "c1", map[string]string{labelType: typeContainer}, 101, 0)
	waitfor.Condition(t, func() bool { // c1's entry is dropped after it was removed
		s.stats.mu.Lock()
		defer s.stats.mu.Unlock()
		_, kept := s.stats.entries["c1"]
		return !kept
	})

	// The stream breaks: every request lists until it is followed again.
	src.subs[0].errs <- errors.New("stream broke")
	waitfor.Condition(t, func() bool { // the index stops trusting the broken stream
		s.stats.index.mu.Lock()
		defer s.stats.index.mu.Unlock()
		return !s.stats.index.live
	})
	before := lists()
	podStats()
	podStats()
	if n := lists() - before; n < 1 {
		t.Errorf("%d lists for 2 requests without an event stream, want at least 1", n)
	}
}
