package pleg

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// fakeEvents is an EventSource the test drives.
type fakeEvents struct {
	mu      sync.Mutex
	calls   int
	refuse  bool // fail every stream before it opens
	events  chan *runtimeapi.ContainerEventResponse
	breakCh chan error
}

func newFakeEvents() *fakeEvents {
	return &fakeEvents{events: make(chan *runtimeapi.ContainerEventResponse), breakCh: make(chan error)}
}

func (f *fakeEvents) streams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeEvents) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connected func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	f.mu.Lock()
	f.calls++
	refuse := f.refuse
	f.mu.Unlock()
	if refuse {
		return errors.New("unimplemented")
	}
	connected(nil)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-f.breakCh:
			return err
		case ev := <-f.events:
			ch <- ev
		}
	}
}

func event(uid, cid string, t runtimeapi.ContainerEventType) *runtimeapi.ContainerEventResponse {
	ev := &runtimeapi.ContainerEventResponse{ContainerId: cid, ContainerEventType: t}
	if uid != "" {
		ev.PodSandboxStatus = &runtimeapi.PodSandboxStatus{Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid, Name: "name-" + uid, Namespace: "ns"}}
	}
	return ev
}

type eventedHarness struct {
	rt     *fakeRuntime
	src    *fakeEvents
	clk    *clocktesting.FakeClock
	cache  *kubecontainer.Cache
	pleg   *EventedPLEG
	cancel context.CancelFunc
	done   chan struct{}
}

func startEvented(t *testing.T, refuse bool) *eventedHarness {
	t.Helper()
	h := &eventedHarness{rt: newFakeRuntime(), src: newFakeEvents(), clk: clocktesting.NewFakeClock(t0), cache: kubecontainer.NewCache(), done: make(chan struct{})}
	h.src.refuse = refuse
	var err error
	h.pleg, err = NewEvented(EventedOptions{
		Options:              Options{Runtime: h.rt, Cache: h.cache, Clock: h.clk, RelistPeriod: time.Second},
		Events:               h.src,
		FallbackRelistPeriod: time.Minute,
		MaxStreamRetries:     3,
		StreamRetryBackoff:   10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		defer close(h.done)
		h.pleg.Run(ctx)
	}()
	t.Cleanup(h.stop(t))
	return h
}

func (h *eventedHarness) stop(t *testing.T) func() {
	return func() {
		h.cancel()
		select {
		case <-h.done:
		case <-time.After(5 * time.Second):
			t.Error("EventedPLEG.Run did not return after cancel")
		}
	}
}

func (h *eventedHarness) period() time.Duration {
	return time.Duration(h.pleg.generic.relistPeriod.Load())
}

func TestEventedStream(t *testing.T) {
	t.Parallel()
	h := startEvented(t, false)
	h.rt.setPods(pod("a", ctrs(ctr("c1", kubecontainer.StateRunning))))
	waitFor(t, func() bool { return h.period() == time.Minute })

	h.src.events <- event("a", "c1", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	select {
	case ev := <-h.pleg.Watch():
		// The relist triggered on connect may report it first; either way it is c1 starting.
		if ev.ID != "a" || ev.Type != ContainerStarted || ev.Data != "c1" {
			t.Errorf("event = %+v, want a/ContainerStarted/c1", ev)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event for the started container")
	}
	waitFor(t, func() bool { st, _ := h.cache.Get("a"); return len(st.ContainerStatuses) == 1 })
	// Both the relist on connect and the event read the pod.
	waitFor(t, func() bool { return h.rt.calls("a") == 2 })

	// A created event only refreshes the cache.
	reads := h.rt.calls("a")
	h.src.events <- event("a", "c2", runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT)
	waitFor(t, func() bool { return h.rt.calls("a") >= reads+1 })

	// An event without its pod makes the relist look.
	lists := h.rt.lists()
	h.src.events <- event("", "x", runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
	waitFor(t, func() bool { return h.rt.lists() > lists })

	// While events flow, the cache's global time moves every second.
	// (A wait on a pod nobody has returns once the global time passes before.)
	before := h.clk.Now()
	waitFor(t, func() bool {
		h.clk.Step(time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		_, err := h.cache.GetNewerThan(ctx, "nobody", before)
		return err == nil
	})
}

func TestEventedFallsBackWhileStreamIsDown(t *testing.T) {
	t.Parallel()
	h := startEvented(t, false)
	waitFor(t, func() bool { return h.period() == time.Minute })
	if ok, err := h.pleg.Healthy(); !ok {
		t.Errorf("Healthy() = false, %v", err)
	}
	h.src.breakCh <- errors.New("stream reset")
	waitFor(t, func() bool { return h.period() == time.Second })
	if n := h.src.streams(); n != 1 {
		t.Errorf("streams opened before the backoff = %d, want 1", n)
	}
	// After the backoff the stream reopens and the relist slows down again.
	waitFor(t, func() bool {
		h.clk.Step(time.Second)
		return h.src.streams() == 2 && h.period() == time.Minute
	})
}

func TestEventedGivesUpOnBrokenStream(t *testing.T) {
	t.Parallel()
	h := startEvented(t, true)
	waitFor(t, func() bool {
		h.clk.Step(time.Second)
		return h.src.streams() == 3
	})
	// No fourth attempt, and the relist stays fast.
	for range 30 {
		h.clk.Step(time.Second)
	}
	if n := h.src.streams(); n != 3 {
		t.Errorf("streams = %d, want 3 (MaxStreamRetries)", n)
	}
	if p := h.period(); p != time.Second {
		t.Errorf("relist period = %v, want the fast 1s", p)
	}
	lists := h.rt.lists()
	waitFor(t, func() bool {
		h.clk.Step(time.Second)
		return h.rt.lists() > lists
	})
}

func TestEventType(t *testing.T) {
	t.Parallel()
	got := []PodLifecycleEventType{
		eventType(runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT),
		eventType(runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT),
		eventType(runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT),
		eventType(runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT),
	}
	want := []PodLifecycleEventType{"", ContainerStarted, ContainerDied, ContainerRemoved}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("eventType = %v, want %v", got, want)
	}
}

// TestEventedHangingPodBlocksNoOther: each pod's status is read on its own,
// so a pod whose runtime calls hang delays no other pod's events; the hung
// read ends at the status read timeout, with the error cached.
func TestEventedHangingPodBlocksNoOther(t *testing.T) {
	t.Parallel()
	h := startEvented(t, false)
	h.rt.setPods(pod("a", ctrs(ctr("c1", kubecontainer.StateRunning))), pod("b", ctrs(ctr("c2", kubecontainer.StateRunning))))
	h.rt.setHang("a", true)
	waitFor(t, func() bool { return h.period() == time.Minute })
	h.src.events <- event("a", "c1", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	waitFor(t, func() bool { return h.rt.calls("a") >= 1 })
	h.src.events <- event("b", "c2", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-h.pleg.Watch():
			if ev.ID == "a" {
				t.Fatalf("event %+v of the hanging pod", ev)
			}
			if ev.ID == "b" && ev.Type == ContainerStarted {
				return
			}
		case <-deadline:
			t.Fatal("no event of pod b while pod a's status read hangs")
		}
	}
}

// TestEventedReinspectRelistsNow: a reinspection (after a resize) does not
// wait for the slow relist.
func TestEventedReinspectRelistsNow(t *testing.T) {
	t.Parallel()
	h := startEvented(t, false)
	h.rt.setPods(pod("a", ctrs(ctr("c1", kubecontainer.StateRunning))))
	waitFor(t, func() bool {
		if h.period() != time.Minute {
			return false
		}
		h.clk.Step(time.Minute)
		return h.rt.calls("a") == 1
	})
	h.pleg.RequestPodReinspect("a")
	waitFor(t, func() bool { return h.rt.calls("a") == 2 })
}

// TestEventedPodChanged: until a read made after the kubelet changed a pod is
// cached, the cache's global time does not answer a wait on it (its own
// event may still be on its way); the change's event brings that read, and
// without one the pod is read after podChangedReadDelay.
func TestEventedPodChanged(t *testing.T) {
	t.Parallel()
	h := startEvented(t, false)
	h.rt.setPods(pod("a", ctrs(ctr("c1", kubecontainer.StateRunning))))
	waitFor(t, func() bool {
		if h.period() != time.Minute {
			return false
		}
		h.clk.Step(time.Minute)
		return h.rt.calls("a") == 1
	})
	notAnswered := func(lastSync time.Time) {
		t.Helper()
		h.clk.Step(time.Millisecond)
		h.cache.UpdateTime(h.clk.Now())
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		if st, err := h.cache.GetNewerThan(ctx, "a", lastSync); err == nil {
			t.Fatalf("the global time answered for a changed pod before its read: %+v", st)
		}
	}
	answered := func(lastSync time.Time) {
		t.Helper()
		waitFor(t, func() bool {
			h.cache.UpdateTime(h.clk.Now().Add(time.Millisecond))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			_, err := h.cache.GetNewerThan(ctx, "a", lastSync)
			return err == nil
		})
	}

	// The change's event reads the pod: no read of its own follows.
	h.pleg.PodChanged("a", "name-a", "ns")
	lastSync := h.clk.Now()
	notAnswered(lastSync)
	h.src.events <- event("a", "c1", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	answered(lastSync)
	reads := h.rt.calls("a")
	h.clk.Step(podChangedReadDelay)
	time.Sleep(20 * time.Millisecond)
	if n := h.rt.calls("a"); n != reads {
		t.Errorf("%d reads after the event's, want none", n-reads)
	}

	// No event: the pod is read after the delay.
	h.pleg.PodChanged("a", "name-a", "ns")
	lastSync = h.clk.Now()
	notAnswered(lastSync)
	h.clk.Step(podChangedReadDelay)
	waitFor(t, func() bool { return h.rt.calls("a") == reads+1 })
	answered(lastSync)
}

// TestFailedRelistRetriesFast: with a slow period, a relist that could not
// list the runtime is retried after the normal 1s, not the slow period.
func TestFailedRelistRetriesFast(t *testing.T) {
	t.Parallel()
	rt := newFakeRuntime()
	clk := clocktesting.NewFakeClock(t0)
	p := mustGeneric(Options{Runtime: rt, Clock: clk, RelistPeriod: 5 * time.Minute})
	rt.setListErr(errors.New("runtime down"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, func() bool { return rt.lists() >= 1 })
	waitFor(t, func() bool {
		clk.Step(DefaultRelistPeriod)
		return rt.lists() >= 3
	})
	rt.setListErr(nil)
	lists := rt.lists()
	waitFor(t, func() bool {
		clk.Step(DefaultRelistPeriod)
		return rt.lists() > lists
	})
	// Listed fine: the next relist waits for the slow period.
	lists = rt.lists()
	for range 10 {
		clk.Step(DefaultRelistPeriod)
	}
	time.Sleep(50 * time.Millisecond)
	if n := rt.lists(); n > lists+1 {
		t.Errorf("%d relists within 10s of a 5m period after a good one", n-lists)
	}
}
