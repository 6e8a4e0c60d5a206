package pleg

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/waitfor"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newTestPLEG(rt *fakeRuntime) (*GenericPLEG, *kubecontainer.Cache, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(t0)
	cache := kubecontainer.NewCache()
	return mustGeneric(Options{Runtime: rt, Cache: cache, Clock: clk}), cache, clk
}

func mustGeneric(opts Options) *GenericPLEG {
	p, err := NewGeneric(opts)
	if err != nil {
		panic(err)
	}
	return p
}

// drain returns the queued events as sorted "uid/type/data" strings.
func drain(p *GenericPLEG) []string {
	var out []string
	for {
		select {
		case ev := <-p.Watch():
			out = append(out, fmt.Sprintf("%s/%s/%v", ev.ID, ev.Type, ev.Data))
		default:
			sort.Strings(out)
			return out
		}
	}
}

func TestRelist(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc        string
		before      []*kubecontainer.Pod
		after       []*kubecontainer.Pod
		wantEvents  []string
		wantCached  map[k8stypes.UID]int // pod -> number of container statuses; -1: not cached
		wantReadsOf map[k8stypes.UID]int // GetPodStatus calls in the second relist
	}{
		{
			desc:       "new pod with running container and sandbox",
			after:      []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateRunning)), ctr("s1", kubecontainer.StateRunning))},
			wantEvents: []string{"a/ContainerStarted/c1", "a/ContainerStarted/s1"},
			wantCached: map[k8stypes.UID]int{"a": 1},
		},
		{
			desc:        "no change: no events, no status reads",
			before:      []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateRunning)))},
			after:       []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateRunning)))},
			wantCached:  map[k8stypes.UID]int{"a": 1},
			wantReadsOf: map[k8stypes.UID]int{"a": 0},
		},
		{
			desc:       "container exits",
			before:     []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateRunning)))},
			after:      []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateExited)))},
			wantEvents: []string{"a/ContainerDied/c1"},
			wantCached: map[k8stypes.UID]int{"a": 1},
		},
		{
			desc:       "exited container restarted as a new one",
			before:     []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateExited)))},
			after:      []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateExited), ctr("c2", kubecontainer.StateRunning)))},
			wantEvents: []string{"a/ContainerStarted/c2"},
			wantCached: map[k8stypes.UID]int{"a": 2},
		},
		{
			desc:       "exited container removed",
			before:     []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateExited), ctr("c2", kubecontainer.StateRunning)))},
			after:      []*kubecontainer.Pod{pod("a", ctrs(ctr("c2", kubecontainer.StateRunning)))},
			wantEvents: []string{"a/ContainerRemoved/c1"},
			wantCached: map[k8stypes.UID]int{"a": 1},
		},
		{
			desc:       "running container removed",
			before:     []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateRunning), ctr("c2", kubecontainer.StateRunning)))},
			after:      []*kubecontainer.Pod{pod("a", ctrs(ctr("c2", kubecontainer.StateRunning)))},
			wantEvents: []string{"a/ContainerDied/c1", "a/ContainerRemoved/c1"},
			wantCached: map[k8stypes.UID]int{"a": 1},
		},
		{
			desc:        "created container: cache refreshed, no event sent",
			before:      []*kubecontainer.Pod{pod("a", nil, ctr("s1", kubecontainer.StateRunning))},
			after:       []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateCreated)), ctr("s1", kubecontainer.StateRunning))},
			wantCached:  map[k8stypes.UID]int{"a": 1},
			wantReadsOf: map[k8stypes.UID]int{"a": 1},
		},
		{
			desc:       "pod gone from the runtime",
			before:     []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateExited)), ctr("s1", kubecontainer.StateRunning)), pod("b", ctrs(ctr("c9", kubecontainer.StateRunning)))},
			after:      []*kubecontainer.Pod{pod("b", ctrs(ctr("c9", kubecontainer.StateRunning)))},
			wantEvents: []string{"a/ContainerDied/s1", "a/ContainerRemoved/c1", "a/ContainerRemoved/s1"},
			wantCached: map[k8stypes.UID]int{"a": -1, "b": 1},
		},
		{
			desc:       "two pods change independently",
			before:     []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateRunning))), pod("b", ctrs(ctr("c2", kubecontainer.StateRunning)))},
			after:      []*kubecontainer.Pod{pod("a", ctrs(ctr("c1", kubecontainer.StateExited))), pod("b", ctrs(ctr("c2", kubecontainer.StateRunning), ctr("c3", kubecontainer.StateRunning)))},
			wantEvents: []string{"a/ContainerDied/c1", "b/ContainerStarted/c3"},
			wantCached: map[k8stypes.UID]int{"a": 1, "b": 2},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			rt := newFakeRuntime()
			p, cache, clk := newTestPLEG(rt)
			ctx := context.Background()
			rt.setPods(tc.before...)
			p.Relist(ctx)
			drain(p)
			readsBefore := map[k8stypes.UID]int{}
			for uid := range tc.wantReadsOf {
				readsBefore[uid] = rt.calls(uid)
			}

			clk.Step(time.Second)
			rt.setPods(tc.after...)
			p.Relist(ctx)

			if got := drain(p); !reflect.DeepEqual(got, tc.wantEvents) {
				t.Errorf("events = %v, want %v", got, tc.wantEvents)
			}
			for uid, n := range tc.wantCached {
				// An uncached pod reads as an empty status.
				st, _ := cache.Get(uid)
				switch {
				case n < 0 && len(st.ContainerStatuses) > 0:
					t.Errorf("pod %s still cached", uid)
				case n >= 0 && len(st.ContainerStatuses) != n:
					t.Errorf("pod %s: %d container statuses cached, want %d", uid, len(st.ContainerStatuses), n)
				}
			}
			for uid, n := range tc.wantReadsOf {
				if got := rt.calls(uid) - readsBefore[uid]; got != n {
					t.Errorf("pod %s: %d status reads, want %d", uid, got, n)
				}
			}
			if !globalTimeIs(cache, clk.Now()) {
				t.Errorf("cache timestamp is not %v", clk.Now())
			}
		})
	}
}

func TestRelistRetriesFailedStatus(t *testing.T) {
	t.Parallel()
	rt := newFakeRuntime()
	p, cache, clk := newTestPLEG(rt)
	ctx := context.Background()
	errBoom := errors.New("boom")

	rt.setPods(pod("a", ctrs(ctr("c1", kubecontainer.StateRunning))))
	rt.setStatusErr("a", errBoom)
	p.Relist(ctx)
	if got := drain(p); len(got) != 0 {
		t.Errorf("events after a failed status read = %v, want none", got)
	}
	if _, err := cache.Get("a"); !errors.Is(err, errBoom) {
		t.Errorf("cached error = %v, want %v", err, errBoom)
	}

	// Nothing changes in the runtime, but the pod is read again and its events come now.
	rt.setStatusErr("a", nil)
	clk.Step(time.Second)
	p.Relist(ctx)
	if got, want := drain(p), []string{"a/ContainerStarted/c1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events after the retry = %v, want %v", got, want)
	}
	st, err := cache.Get("a")
	if err != nil || len(st.ContainerStatuses) != 1 {
		t.Errorf("cache after retry = %+v, %v; want one container, no error", st, err)
	}
	if n := rt.calls("a"); n != 2 {
		t.Errorf("status reads = %d, want 2", n)
	}

	// Once read successfully, an unchanged pod is not read again.
	clk.Step(time.Second)
	p.Relist(ctx)
	if n := rt.calls("a"); n != 2 {
		t.Errorf("status reads after a quiet relist = %d, want 2", n)
	}
}

// TestRelistReinspectSyncsThePod: a reinspected pod whose containers did not
// change state (an in-place resize) is read again and gets a PodSync event,
// so its worker sees the new status at once, not at the periodic resync; the
// next quiet relist neither reads it nor sends anything.
func TestRelistReinspectSyncsThePod(t *testing.T) {
	t.Parallel()
	rt := newFakeRuntime()
	p, _, clk := newTestPLEG(rt)
	ctx := context.Background()
	rt.setPods(pod("a", ctrs(ctr("c1", kubecontainer.StateRunning))), pod("b", ctrs(ctr("c2", kubecontainer.StateRunning))))
	p.Relist(ctx)
	drain(p)

	p.RequestPodReinspect("a")
	clk.Step(time.Second)
	p.Relist(ctx)
	if got, want := drain(p), []string{"a/PodSync/<nil>"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events after a reinspection = %v, want %v", got, want)
	}
	if n := rt.calls("a"); n != 2 {
		t.Errorf("status reads of the reinspected pod = %d, want 2", n)
	}
	if n := rt.calls("b"); n != 1 {
		t.Errorf("status reads of the other pod = %d, want 1", n)
	}

	clk.Step(time.Second)
	p.Relist(ctx)
	if got := drain(p); len(got) != 0 {
		t.Errorf("events after a quiet relist = %v, want none", got)
	}
	if n := rt.calls("a"); n != 2 {
		t.Errorf("status reads after a quiet relist = %d, want 2", n)
	}
}

// A pod whose status read hangs (one container whose runtime calls stall)
// holds a relist back for the status read timeout only: the other pods'
// statuses and the cache time advance, the hung pod's entry is the error, and
// it is read again only after its back-off.
func TestRelistBoundsAHangingStatusRead(t *testing.T) {
	t.Parallel()
	rt := newFakeRuntime()
	clk := clocktesting.NewFakeClock(t0)
	cache := kubecontainer.NewCache()
	const timeout = 50 * time.Millisecond
	p := mustGeneric(Options{Runtime: rt, Cache: cache, Clock: clk, StatusReadTimeout: timeout})
	ctx := context.Background()
	rt.setPods(pod("stuck", ctrs(ctr("c1", kubecontainer.StateRunning))), pod("ok", ctrs(ctr("c2", kubecontainer.StateRunning))))
	rt.setHang("stuck", true)

	start := time.Now()
	p.Relist(ctx)
	if took := time.Since(start); took > 3*time.Second { // unbounded, it would hang
		t.Fatalf("relist took %s with one hanging status read (timeout %s)", took, timeout)
	}
	if got, want := drain(p), []string{"ok/ContainerStarted/c2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v, want %v (the other pod's, not the stuck one's)", got, want)
	}
	if _, err := cache.Get("stuck"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stuck pod's cache entry error = %v, want the deadline", err)
	}
	// The cache time advanced: a worker waiting for a status newer than the
	// relist's start gets one.
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := cache.GetNewerThan(wctx, "ok", t0.Add(-time.Nanosecond)); err != nil {
		t.Errorf("other pod's status newer than the relist: %v", err)
	}

	// Within the back-off (the timeout, doubling) the stuck pod is not read
	// again.
	clk.Step(timeout / 2)
	p.Relist(ctx)
	if n := rt.calls("stuck"); n != 1 {
		t.Errorf("status reads of the stuck pod within its back-off = %d, want 1", n)
	}
	// After it, it is; once the stall ends its events come.
	rt.setHang("stuck", false)
	clk.Step(timeout)
	p.Relist(ctx)
	if n := rt.calls("stuck"); n != 2 {
		t.Errorf("status reads of the stuck pod after its back-off = %d, want 2", n)
	}
	if got, want := drain(p), []string{"stuck/ContainerStarted/c1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events after the stall = %v, want %v", got, want)
	}
	if st, err := cache.Get("stuck"); err != nil || len(st.ContainerStatuses) != 1 {
		t.Errorf("stuck pod's cache after the stall = %+v, %v", st, err)
	}
}

func TestHealthy(t *testing.T) {
	t.Parallel()
	rt := newFakeRuntime()
	p, _, clk := newTestPLEG(rt)
	ctx := context.Background()

	if ok, err := p.Healthy(); ok || err == nil {
		t.Errorf("before the first relist: Healthy() = %v, %v; want false and an error", ok, err)
	}
	p.Relist(ctx)
	if ok, err := p.Healthy(); !ok || err != nil {
		t.Errorf("after a relist: Healthy() = %v, %v; want true", ok, err)
	}
	clk.Step(RelistThreshold)
	if ok, _ := p.Healthy(); !ok {
		t.Error("at exactly the threshold: unhealthy, want healthy")
	}
	// A failing relist does not count.
	rt.setListErr(errors.New("runtime down"))
	p.Relist(ctx)
	clk.Step(time.Second)
	if ok, err := p.Healthy(); ok || err == nil {
		t.Errorf("past the threshold: Healthy() = %v, %v; want false and an error", ok, err)
	}
	rt.setListErr(nil)
	p.Relist(ctx)
	if ok, _ := p.Healthy(); !ok {
		t.Error("after a successful relist: unhealthy, want healthy")
	}
}

func TestPodIPsKeptForStoppedSandbox(t *testing.T) {
	t.Parallel()
	ready := &runtimeapi.PodSandboxStatus{State: runtimeapi.PodSandboxState_SANDBOX_READY}
	notReady := &runtimeapi.PodSandboxStatus{State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY}
	for _, tc := range []struct {
		desc   string
		cached []string
		status *kubecontainer.PodStatus
		want   []string
	}{
		{desc: "status has IPs", cached: []string{"10.0.0.1"}, status: &kubecontainer.PodStatus{IPs: []string{"10.0.0.2"}}, want: []string{"10.0.0.2"}},
		{desc: "sandbox stopped keeps old IPs", cached: []string{"10.0.0.1"}, status: &kubecontainer.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{notReady}}, want: []string{"10.0.0.1"}},
		{desc: "ready sandbox without IP", cached: []string{"10.0.0.1"}, status: &kubecontainer.PodStatus{SandboxStatuses: []*runtimeapi.PodSandboxStatus{ready}}},
		{desc: "nothing cached", status: &kubecontainer.PodStatus{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := kubecontainer.NewCache()
			if tc.cached != nil {
				c.Set("a", &kubecontainer.PodStatus{ID: "a", IPs: tc.cached}, nil, t0)
			}
			if got := podIPs(c, "a", tc.status); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("podIPs = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRunRelistsEveryPeriodUntilCancelled(t *testing.T) {
	t.Parallel()
	rt := newFakeRuntime()
	clk := clocktesting.NewFakeClock(t0)
	p := mustGeneric(Options{Runtime: rt, Clock: clk, RelistPeriod: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	waitFor(t, func() bool { return rt.lists() == 1 && clk.HasWaiters() })
	clk.Step(4 * time.Second)
	if n := rt.lists(); n != 1 {
		t.Errorf("relists before the period = %d, want 1", n)
	}
	clk.Step(time.Second)
	waitFor(t, func() bool { return rt.lists() == 2 })
	p.requestRelist()
	waitFor(t, func() bool { return rt.lists() == 3 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

// waitFor polls cond for up to 5 seconds.
var waitFor = waitfor.Condition

// globalTimeIs reports whether the cache's global timestamp is exactly ts: a
// waiter on a pod nobody has is answered for ts-1ns but not for ts.
func globalTimeIs(cache *kubecontainer.Cache, ts time.Time) bool {
	fresh := func(min time.Time) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := cache.GetNewerThan(ctx, "nobody", min)
		return err == nil
	}
	return fresh(ts.Add(-time.Nanosecond)) && !fresh(ts)
}
