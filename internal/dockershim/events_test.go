package dockershim

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/waitfor"
)

func TestEventsCRIType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action string
		want   runtimeapi.ContainerEventType
		ok     bool
	}{
		{"create", runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, true},
		{"start", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, true},
		{"die", runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, true},
		{"destroy", runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, true},
		{"stop", 0, false},
		{"kill", 0, false},
		{"exec_create: sh", 0, false},
		{"health_status: healthy", 0, false},
	} {
		t.Run(tc.action, func(t *testing.T) {
			got, ok := criEventType(tc.action)
			if got != tc.want || ok != tc.ok {
				t.Errorf("criEventType(%q) = %v, %v; want %v, %v", tc.action, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestEventsOptions(t *testing.T) {
	t.Parallel()
	o := eventOptions(0)
	if o.Since != "" || !o.Filters.ExactMatch("type", "container") || !o.Filters.ExactMatch("label", labelType) {
		t.Errorf("first subscription options = %+v", o)
	}
	if got := eventOptions(1700000000999999999).Since; got != "1700000001.000000000" {
		t.Errorf("since = %q, want the nanosecond after the last event", got)
	}
}

// eventsFakeSource hands out one subscription per Events call from a queue.
type eventsFakeSource struct {
	mu    sync.Mutex
	subs  []eventsFakeSub
	calls []libdocker.EventsOptions
	next  chan struct{} // signalled on every Events call
}

type eventsFakeSub struct {
	msgs chan libdocker.EventMessage
	errs chan error
}

func newEventsFakeSource(n int) *eventsFakeSource {
	src := &eventsFakeSource{next: make(chan struct{}, 16)}
	for range n {
		src.subs = append(src.subs, eventsFakeSub{msgs: make(chan libdocker.EventMessage, 16), errs: make(chan error, 1)})
	}
	return src
}

func (f *eventsFakeSource) Events(ctx context.Context, opts libdocker.EventsOptions) (<-chan libdocker.EventMessage, <-chan error) {
	f.mu.Lock()
	defer func() { f.next <- struct{}{} }()
	defer f.mu.Unlock()
	i := len(f.calls)
	f.calls = append(f.calls, opts)
	if i < len(f.subs) {
		return f.subs[i].msgs, f.subs[i].errs
	}
	errs := make(chan error, 1)
	go func() { <-ctx.Done(); errs <- ctx.Err() }()
	return nil, errs
}

// eventsMsg builds a Docker event (its Action and Actor types are not re-exported).
func eventsMsg(action, id string, attrs map[string]string, timeNano, timeSec int64) libdocker.EventMessage {
	m := libdocker.EventMessage{TimeNano: timeNano, Time: timeSec}
	reflect.ValueOf(&m.Action).Elem().SetString(action)
	m.Actor.ID, m.Actor.Attributes = id, attrs
	return m
}

func eventsRecv(t *testing.T, ch <-chan libdocker.EventMessage) libdocker.EventMessage {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
	}
	return libdocker.EventMessage{}
}

func TestEventsBrokerFanOutAndResubscribe(t *testing.T) {
	t.Parallel()
	src := newEventsFakeSource(2)
	b := newEventBroker(src, zaptest.NewLogger(t))
	b.minBackoff, b.maxBackoff = time.Millisecond, 4*time.Millisecond
	b.Wait() // never started: returns at once

	a, c := b.subscribe(), b.subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	b.Start(ctx)
	b.Start(ctx) // second Start is a no-op
	src.subs[0].msgs <- eventsMsg("start", "x", nil, 5e9, 0)
	for _, sub := range []*eventSubscription{a, c} {
		if m := eventsRecv(t, sub.ch); m.Actor.ID != "x" {
			t.Fatalf("got %+v", m)
		}
	}
	src.subs[0].errs <- errors.New("stream broke")
	// The break ends the subscriptions (their clients must resync) ...
	for _, sub := range []*eventSubscription{a, c} {
		select {
		case <-sub.gap:
		case <-time.After(5 * time.Second):
			t.Fatal("a subscription was not told of the gap in the stream")
		}
	}
	// ... and a new one gets what the re-subscribed stream brings.
	d := b.subscribe()
	src.subs[1].msgs <- eventsMsg("die", "y", nil, 6e9, 0)
	if m := eventsRecv(t, d.ch); m.Actor.ID != "y" {
		t.Fatalf("after re-subscribing got %+v", m)
	}
	b.unsubscribe(d)
	cancel()
	b.Wait()
	src.mu.Lock()
	defer src.mu.Unlock()
	if len(src.calls) != 2 {
		t.Fatalf("%d subscriptions, want 2", len(src.calls))
	}
	if src.calls[1].Since != "5.000000001" {
		t.Errorf("re-subscription since = %q, want 5.000000001", src.calls[1].Since)
	}
}

func TestEventsBrokerBackoffIsBounded(t *testing.T) {
	t.Parallel()
	src := newEventsFakeSource(6)
	for _, s := range src.subs {
		close(s.errs)
	}
	b := newEventBroker(src, zaptest.NewLogger(t))
	b.minBackoff, b.maxBackoff = time.Millisecond, 2*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	b.Start(ctx)
	for range 6 {
		select {
		case <-src.next:
		case <-time.After(5 * time.Second):
			t.Fatal("broker did not re-subscribe after a broken stream")
		}
	}
	cancel()
	done := make(chan struct{})
	go func() { b.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after cancel")
	}
}

func TestEventsBrokerDropsForSlowSubscriber(t *testing.T) {
	t.Parallel()
	b := newEventBroker(newEventsFakeSource(0), zaptest.NewLogger(t))
	b.bufSize = 2
	slow, fast := b.subscribe(), b.subscribe()
	got := make(chan int)
	go func() {
		n := 0
		for range 5 {
			<-fast.ch
			n++
		}
		got <- n
	}()
	for range 5 {
		b.publish(eventsMsg("start", "z", nil, 1, 0))
		waitfor.Condition(t, func() bool { return len(fast.ch) == 0 }) // the fast reader drained
	}
	select {
	case n := <-got:
		if n != 5 {
			t.Errorf("fast subscriber got %d events, want 5", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("fast subscriber was blocked")
	}
	if len(slow.ch) != 2 || slow.dropped != 3 {
		t.Errorf("slow subscriber: %d buffered, %d dropped; want 2 and 3", len(slow.ch), slow.dropped)
	}
}

// eventsFakeStream is a GetContainerEvents server stream collecting what is sent.
type eventsFakeStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent chan *runtimeapi.ContainerEventResponse
}

func (f *eventsFakeStream) Context() context.Context { return f.ctx }

func (f *eventsFakeStream) Send(r *runtimeapi.ContainerEventResponse) error {
	f.sent <- r
	return nil
}

func TestEventsGetContainerEvents(t *testing.T) {
	t.Parallel()
	sbLabels := map[string]string{labelMetadata: `{"name":"web","namespace":"ns","uid":"u1","attempt":1}`, "app": "web"}
	f := &statsFakeDocker{containers: map[string]libdocker.ContainerJSON{
		"sb": statsFakeContainer("sb", typeSandbox, "", 10, 0, "", sbLabels),
		"c1": statsFakeContainer("c1", typeContainer, "sb", 11, 0, "", nil),
	}}
	src := newEventsFakeSource(1)
	s := statsTestService(t, f)
	s.events = newEventBroker(src, zaptest.NewLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := &eventsFakeStream{ctx: ctx, sent: make(chan *runtimeapi.ContainerEventResponse, 8)}
	done := make(chan error, 1)
	go func() { done <- s.GetContainerEvents(&runtimeapi.GetEventsRequest{}, stream) }()
	// Wait until the stream subscribed before events flow.
	for deadline := time.Now().Add(5 * time.Second); ; {
		s.events.mu.Lock()
		n := len(s.events.subs)
		s.events.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("GetContainerEvents did not subscribe")
		}
		time.Sleep(time.Millisecond)
	}
	s.events.Start(ctx)

	goneAttrs := map[string]string{labelType: typeSandbox, labelManaged: "true", "name": "k8s_POD_gone_ns_u2_0", "image": "pause", "app": "old"}
	for _, m := range []libdocker.EventMessage{
		eventsMsg("start", "c1", map[string]string{labelType: typeContainer, labelSandboxID: "sb"}, 42, 0),
		eventsMsg("exec_start: sh", "c1", nil, 43, 0),
		eventsMsg("create", "sb", map[string]string{labelType: typeSandbox}, 0, 3),
		eventsMsg("destroy", "gone", goneAttrs, 50, 0),
	} {
		src.subs[0].msgs <- m
	}
	recv := func() *runtimeapi.ContainerEventResponse {
		t.Helper()
		select {
		case r := <-stream.sent:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no event sent within 5s")
		}
		return nil
	}
	r := recv()
	if r.ContainerId != "c1" || r.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT || r.CreatedAt != 42 ||
		r.PodSandboxStatus.GetId() != "sb" || r.PodSandboxStatus.GetMetadata().GetName() != "web" || len(r.ContainersStatuses) != 1 {
		t.Errorf("container start event = %v", r)
	}
	r = recv()
	if r.ContainerId != "sb" || r.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT || r.CreatedAt != 3e9 ||
		r.PodSandboxStatus.GetId() != "sb" {
		t.Errorf("sandbox create event = %v", r)
	}
	r = recv()
	st := r.PodSandboxStatus
	if r.ContainerEventType != runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT || st.GetId() != "gone" ||
		st.GetState() != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || st.GetMetadata().GetName() != "gone" ||
		st.GetLabels()["app"] != "old" || st.GetLabels()["image"] != "" {
		t.Errorf("deleted sandbox event = %v", r)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("GetContainerEvents returned %v after the client left", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("GetContainerEvents did not return after the client left")
	}
	s.events.Wait()
}

// TestEventsBrokerMute: a muted container's events reach the observers but
// not the subscribers, until unmuted (at once, or after a while).
func TestEventsBrokerMute(t *testing.T) {
	t.Parallel()
	b := newEventBroker(newEventsFakeSource(0), zaptest.NewLogger(t))
	obs := &countingObserver{}
	b.addObserver(obs)
	sub := b.subscribe()
	b.mute("sb")
	b.publish(eventsMsg("start", "sb", nil, 1, 0))
	b.publish(eventsMsg("start", "other", nil, 2, 0))
	if m := eventsRecv(t, sub.ch); m.Actor.ID != "other" {
		t.Fatalf("got %+v, want only the unmuted container's event", m)
	}
	b.unmute("sb", 0)
	b.publish(eventsMsg("die", "sb", nil, 3, 0))
	if m := eventsRecv(t, sub.ch); m.Actor.ID != "sb" {
		t.Fatalf("got %+v after unmute, want sb's event", m)
	}
	b.mute("failed")
	b.unmute("failed", time.Hour)
	b.publish(eventsMsg("destroy", "failed", nil, 4, 0))
	b.mu.Lock()
	b.muted["failed"] = time.Now().Add(-time.Second) // the hour has passed
	b.mu.Unlock()
	b.publish(eventsMsg("create", "failed", nil, 5, 0))
	if m := eventsRecv(t, sub.ch); m.TimeNano != 5 {
		t.Fatalf("got %+v, want the event after the mute ran out (time 5)", m)
	}
	if got := obs.count(); got != 5 {
		t.Errorf("observer saw %d events, want all 5", got)
	}
	// A sandbox whose set-up succeeded: its held-back start is sent then.
	b.mute("ready")
	b.publish(eventsMsg("start", "ready", nil, 6, 0))
	b.sandboxReady("ready", map[string]string{labelType: typeSandbox})
	if m := eventsRecv(t, sub.ch); m.Actor.ID != "ready" || string(m.Action) != "start" || m.Actor.Attributes[labelType] != typeSandbox {
		t.Fatalf("got %+v, want the sandbox's start when it is ready", m)
	}
	select {
	case m := <-sub.ch:
		t.Fatalf("unexpected event %+v (the held-back one must not come too)", m)
	default:
	}
}

type countingObserver struct {
	mu sync.Mutex
	n  int
}

func (o *countingObserver) observeEvent(libdocker.EventMessage) { o.mu.Lock(); o.n++; o.mu.Unlock() }
func (o *countingObserver) observeStream(bool)                  {}
func (o *countingObserver) count() int                          { o.mu.Lock(); defer o.mu.Unlock(); return o.n }

func TestEventsPodIdentityOnly(t *testing.T) {
	t.Parallel()
	if wantsPodIdentityOnly(context.Background()) {
		t.Error("a stream with no metadata asked for pod identity only")
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(EventsDetailKey, EventsDetailPodIdentity))
	if !wantsPodIdentityOnly(ctx) {
		t.Errorf("%s: %s not seen", EventsDetailKey, EventsDetailPodIdentity)
	}

	sbAttrs := map[string]string{labelType: typeSandbox, labelManaged: "true", labelMetadata: `{"name":"web","namespace":"ns","uid":"u1","attempt":1}`, "app": "web", "image": "pause"}
	ctrAttrs := map[string]string{labelType: typeContainer, labelSandboxID: "sb", kubePodNameLabel: "web", kubePodNamespaceLabel: "ns", kubePodUIDLabel: "u1", "app": "ctr"}
	for _, tc := range []struct {
		name      string
		m         libdocker.EventMessage
		state     runtimeapi.PodSandboxState
		appLabel  string
		eventType runtimeapi.ContainerEventType
	}{
		{"sandbox start", eventsMsg("start", "sb", sbAttrs, 5, 0), runtimeapi.PodSandboxState_SANDBOX_READY, "web", runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT},
		{"sandbox die", eventsMsg("die", "sb", sbAttrs, 5, 0), runtimeapi.PodSandboxState_SANDBOX_NOTREADY, "web", runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT},
		{"container create", eventsMsg("create", "c1", ctrAttrs, 5, 0), runtimeapi.PodSandboxState_SANDBOX_READY, "", runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT},
	} {
		r := podIdentityEvent(tc.m)
		st := r.GetPodSandboxStatus()
		md := st.GetMetadata()
		if r.ContainerEventType != tc.eventType || st.GetId() != "sb" || md.GetName() != "web" || md.GetNamespace() != "ns" || md.GetUid() != "u1" ||
			st.GetState() != tc.state || st.GetLabels()["app"] != tc.appLabel || st.GetLabels()["image"] != "" || len(r.ContainersStatuses) != 0 {
			t.Errorf("%s: event = %v", tc.name, r)
		}
	}
	if r := podIdentityEvent(eventsMsg("exec_start: sh", "c1", ctrAttrs, 5, 0)); r != nil {
		t.Errorf("exec event converted: %v", r)
	}
}
