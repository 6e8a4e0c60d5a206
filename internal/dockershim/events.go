package dockershim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/faultinject"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// The event broker holds the shim's single Docker event subscription (container events
// of managed objects) and fans each event out to the GetContainerEvents streams. A
// broken stream is re-subscribed with bounded exponential backoff, asking Docker to
// replay what happened since the last event seen. A subscriber whose buffer is full
// loses events (with a warning) rather than stalling the others. Observers (the stats
// cache) are told of every event and of the stream going up and down, synchronously
// from the broker's loop, so they never lose one.

const (
	eventBufferSize = 256
	eventMinBackoff = 100 * time.Millisecond
	eventMaxBackoff = 5 * time.Second
	// eventStatusTimeout bounds the status reads that fill in one event.
	eventStatusTimeout = 2 * time.Second
	// failedSandboxMute is how long the events of a sandbox whose set-up
	// failed stay held back after its rollback (its die and destroy events
	// come from Docker a moment later).
	failedSandboxMute = time.Minute
)

// eventSource is the part of Docker the broker uses.
type eventSource interface {
	Events(ctx context.Context, opts libdocker.EventsOptions) (<-chan libdocker.EventMessage, <-chan error)
}

// eventObserver is told of each event and of the stream going up or down, from the
// broker's loop with the broker's lock held: it must be quick and must not call the
// broker back.
type eventObserver interface {
	observeEvent(m libdocker.EventMessage)
	observeStream(up bool)
}

// eventBroker fans Docker container events out to subscribers.
type eventBroker struct {
	src        eventSource
	logger     *zap.Logger
	bufSize    int
	minBackoff time.Duration
	maxBackoff time.Duration

	mu        sync.Mutex
	subs      map[*eventSubscription]struct{}
	muted     map[string]time.Time // container ID -> until (zero: until unmuted)
	observers []eventObserver
	live      bool // a subscription to Docker is being followed
	started   bool
	wg        sync.WaitGroup
}

// eventSubscription is one subscriber's buffered channel.
type eventSubscription struct {
	ch      chan libdocker.EventMessage
	dropped int
	// gap is closed when the broker's Docker stream broke after the
	// subscription started: events may have been missed (a dockerd restart
	// loses what the old daemon emitted), so the subscriber must resync.
	gap chan struct{}
}

// newEventBroker wires a broker; Start runs it.
func newEventBroker(src eventSource, logger *zap.Logger) *eventBroker {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &eventBroker{
		src:        src,
		logger:     logger,
		bufSize:    eventBufferSize,
		minBackoff: eventMinBackoff,
		maxBackoff: eventMaxBackoff,
		subs:       map[*eventSubscription]struct{}{},
		muted:      map[string]time.Time{},
	}
}

// mute keeps the events of container id from the subscribers (observers
// still get them) until unmute: a sandbox being set up is not the client's
// yet (RunPodSandbox has not answered), and one whose set-up failed never
// will be.
func (b *eventBroker) mute(id string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.muted[id] = time.Time{}
}

// unmute lets id's events through again, at once (after) or after the
// given time, long enough for the events of a rolled-back sandbox's removal
// to pass.
func (b *eventBroker) unmute(id string, after time.Duration) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if after <= 0 {
		delete(b.muted, id)
		return
	}
	now := time.Now()
	for other, until := range b.muted {
		if !until.IsZero() && now.After(until) {
			delete(b.muted, other)
		}
	}
	b.muted[id] = now.Add(after)
}

// mutedLocked reports whether id's events are held back; caller holds mu.
func (b *eventBroker) mutedLocked(id string) bool {
	until, ok := b.muted[id]
	if !ok {
		return false
	}
	if !until.IsZero() && time.Now().After(until) {
		delete(b.muted, id)
		return false
	}
	return true
}

// Start runs the subscription loop until ctx ends. Later calls do nothing.
func (b *eventBroker) Start(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started {
		return
	}
	b.started = true
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		defer logging.HandleCrash(b.logger, "docker event broker")
		b.run(ctx)
	}()
}

// Wait blocks until the loop started by Start has exited (at once if never started).
func (b *eventBroker) Wait() { b.wg.Wait() }

// subscribe registers a subscriber; call unsubscribe when done.
func (b *eventBroker) subscribe() *eventSubscription {
	sub := &eventSubscription{ch: make(chan libdocker.EventMessage, b.bufSize), gap: make(chan struct{})}
	b.mu.Lock()
	b.subs[sub] = struct{}{}
	b.mu.Unlock()
	return sub
}

func (b *eventBroker) unsubscribe(sub *eventSubscription) {
	b.mu.Lock()
	delete(b.subs, sub)
	b.mu.Unlock()
}

// addObserver registers o and tells it at once whether the stream is up.
func (b *eventBroker) addObserver(o eventObserver) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.observers = append(b.observers, o)
	o.observeStream(b.live)
}

// setLive records whether a subscription is being followed and tells the
// observers. When it goes down, every subscriber is told of the gap and
// dropped: its stream ends, and its client relists (and subscribes again).
func (b *eventBroker) setLive(up bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.live = up
	for _, o := range b.observers {
		o.observeStream(up)
	}
	if up {
		return
	}
	for sub := range b.subs {
		close(sub.gap)
		delete(b.subs, sub)
	}
}

// publish hands m to every observer, then to every subscriber without blocking.
func (b *eventBroker) publish(m libdocker.EventMessage) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, o := range b.observers {
		o.observeEvent(m)
	}
	if b.mutedLocked(m.Actor.ID) {
		return
	}
	b.sendLocked(m)
}

// sendLocked hands m to every subscriber without blocking; caller holds mu.
func (b *eventBroker) sendLocked(m libdocker.EventMessage) {
	for sub := range b.subs {
		select {
		case sub.ch <- m:
		default:
			sub.dropped++
			if sub.dropped == 1 || sub.dropped%100 == 0 {
				b.logger.Warn("container event subscriber is too slow; dropping events",
					zap.Int("dropped", sub.dropped), zap.String("action", string(m.Action)), zap.String("id", m.Actor.ID))
			}
		}
	}
}

// sandboxReady ends the mute of a sandbox whose set-up succeeded and sends
// its subscribers the sandbox's started event then, as containerd sends it at
// the end of RunPodSandbox (Docker's own start event was held back while the
// network was set up).
func (b *eventBroker) sandboxReady(id string, labels map[string]string) {
	if b == nil {
		return
	}
	m := libdocker.EventMessage{TimeNano: time.Now().UnixNano()}
	m.Action = "start"
	m.Actor.ID = id
	m.Actor.Attributes = labels
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.muted, id)
	b.sendLocked(m)
}

// run subscribes to Docker events and re-subscribes after failures until ctx ends.
func (b *eventBroker) run(ctx context.Context) {
	backoff := b.minBackoff
	var last int64 // TimeNano of the last event seen
	for ctx.Err() == nil {
		faultinject.Point("dockershim.events")
		got, err := b.follow(ctx, &last)
		if ctx.Err() != nil {
			return
		}
		if got {
			backoff = b.minBackoff
		}
		b.logger.Info("docker event stream broke; re-subscribing", zap.Duration("backoff", backoff), zap.Error(err))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, b.maxBackoff)
	}
}

// follow reads one subscription until it fails; got reports whether any event came.
func (b *eventBroker) follow(ctx context.Context, last *int64) (got bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msgs, errs := b.src.Events(sctx, eventOptions(*last))
	b.setLive(true)
	defer b.setLive(false)
	for {
		select {
		case <-ctx.Done():
			return got, ctx.Err()
		case err, ok := <-errs:
			if !ok || err == nil {
				err = errors.New("event stream closed")
			}
			return got, err
		case m, ok := <-msgs:
			if !ok {
				return got, errors.New("event stream closed")
			}
			got = true
			if m.TimeNano > *last {
				*last = m.TimeNano
			}
			b.publish(m)
		}
	}
}

// eventOptions filters managed container lifecycle events; after a break, since asks
// Docker to replay events newer than the last one seen.
func eventOptions(lastNano int64) libdocker.EventsOptions {
	f := libdocker.NewFilterArgs(
		libdocker.FilterArg("type", "container"),
		// Any Kubernetes container, also those cri-dockerd or the 1.23
		// dockershim created (adopted on a switch): they carry the type
		// label but not this shim's.
		libdocker.FilterArg("label", labelType),
		libdocker.FilterArg("event", "create"),
		libdocker.FilterArg("event", "start"),
		libdocker.FilterArg("event", "die"),
		libdocker.FilterArg("event", "destroy"),
	)
	opts := libdocker.EventsOptions{Filters: f}
	if lastNano > 0 {
		next := lastNano + 1
		opts.Since = strconv.FormatInt(next/1e9, 10) + "." + fmt.Sprintf("%09d", next%1e9)
	}
	return opts
}

// criEventType maps a Docker container action to a CRI event type.
func criEventType(action string) (runtimeapi.ContainerEventType, bool) {
	switch action {
	case "create":
		return runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, true
	case "start":
		return runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, true
	case "die":
		return runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, true
	case "destroy":
		return runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT, true
	}
	return 0, false
}

// GetContainerEvents streams container lifecycle events until the client goes away,
// or until the shim's Docker event stream breaks: the stream then ends with
// Unavailable, since events may have been lost (the client relists and subscribes
// again). Sandbox (pause container) events carry the sandbox ID as container ID.
// Statuses are best effort: a deleted object's status may be missing.
//
// A client that reads only which pod an event is about (this project's kubelet,
// whose PLEG reads the pod's status itself) may say so with the gRPC metadata
// EventsDetailKey: EventsDetailPodIdentity. Its events then carry the sandbox
// status the event's labels give and no container statuses, which spares
// Docker three reads per event (one sandbox inspect, one list, one inspect per
// container) while pods start in bursts. Other clients get the full statuses.
func (s *Service) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream runtimeapi.RuntimeService_GetContainerEventsServer) error {
	ctx := stream.Context()
	identityOnly := wantsPodIdentityOnly(ctx)
	sub := s.events.subscribe()
	defer s.events.unsubscribe(sub)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-sub.gap:
			return status.Error(codes.Unavailable, "the Docker event stream broke: events may have been missed; relist and subscribe again")
		case m := <-sub.ch:
			var resp *runtimeapi.ContainerEventResponse
			if identityOnly {
				resp = podIdentityEvent(m)
			} else {
				resp = s.containerEvent(ctx, m)
			}
			if resp == nil {
				continue
			}
			if err := stream.Send(resp); err != nil {
				return fmt.Errorf("send container event: %w", err)
			}
		}
	}
}

// EventsDetailKey is the gRPC metadata key by which a GetContainerEvents
// client chooses how much each event carries; EventsDetailPodIdentity asks
// for the pod's identity only (see GetContainerEvents).
const (
	EventsDetailKey         = "x-dockershim-container-events"
	EventsDetailPodIdentity = "pod-identity"
)

// wantsPodIdentityOnly reports whether the stream's client asked for events
// that carry the pod's identity only.
func wantsPodIdentityOnly(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get(EventsDetailKey) {
		if v == EventsDetailPodIdentity {
			return true
		}
	}
	return false
}

// baseEvent is the event's type, container and time, with the ID of its
// sandbox; nil when it is not an event the CRI reports.
func baseEvent(m libdocker.EventMessage) (*runtimeapi.ContainerEventResponse, string) {
	typ, ok := criEventType(string(m.Action))
	if !ok || m.Actor.ID == "" {
		return nil, ""
	}
	attrs := m.Actor.Attributes
	sandboxID := attrs[labelSandboxID]
	if attrs[labelType] == typeSandbox {
		sandboxID = m.Actor.ID
	}
	created := m.TimeNano
	if created == 0 {
		created = m.Time * int64(time.Second)
	}
	return &runtimeapi.ContainerEventResponse{ContainerId: m.Actor.ID, ContainerEventType: typ, CreatedAt: created}, sandboxID
}

// podIdentityEvent converts a Docker event with no Docker read: the sandbox
// status is what the event's labels give.
func podIdentityEvent(m libdocker.EventMessage) *runtimeapi.ContainerEventResponse {
	resp, sandboxID := baseEvent(m)
	if resp != nil && sandboxID != "" {
		resp.PodSandboxStatus = eventSandboxStatus(m, sandboxID)
	}
	return resp
}

// containerEvent converts a Docker event, with the statuses of its sandbox and
// of the sandbox's containers; nil when it is not one the CRI reports.
func (s *Service) containerEvent(ctx context.Context, m libdocker.EventMessage) *runtimeapi.ContainerEventResponse {
	resp, sandboxID := baseEvent(m)
	if resp == nil || sandboxID == "" {
		return resp
	}
	attrs := m.Actor.Attributes
	// The statuses are read with a bound: one pod whose Docker calls hang
	// must not hold back every other pod's events (the stream is one queue).
	// Past it the event goes out with the status its labels give.
	ctx, cancel := context.WithTimeout(ctx, eventStatusTimeout)
	defer cancel()
	st, err := s.sandboxStatus(ctx, sandboxID)
	switch {
	case err == nil:
		resp.PodSandboxStatus = st
	case attrs[labelType] == typeSandbox || ctx.Err() != nil:
		resp.PodSandboxStatus = eventSandboxStatus(m, sandboxID)
		s.logger.Debug("container event: sandbox status from the event", zap.String("sandbox", sandboxID), zap.Error(err))
	default:
		s.logger.Debug("container event: sandbox status", zap.String("sandbox", sandboxID), zap.Error(err))
	}
	if ctx.Err() != nil {
		return resp
	}
	cs, err := s.containerStatusesOfSandbox(ctx, sandboxID)
	if err != nil {
		s.logger.Debug("container event: container statuses", zap.String("sandbox", sandboxID), zap.Error(err))
	}
	resp.ContainersStatuses = cs
	return resp
}

// eventSandboxStatus is a status rebuilt from an event's attributes (which carry
// the labels). From a sandbox event: its metadata and labels, READY after a
// start and NOTREADY otherwise. From an event of one of its containers: the
// pod's identity from the kubelet's labels, READY (a container is being
// worked on), no labels (the event's are the container's).
func eventSandboxStatus(m libdocker.EventMessage, sandboxID string) *runtimeapi.PodSandboxStatus {
	attrs := m.Actor.Attributes
	if attrs[labelType] != typeSandbox {
		return &runtimeapi.PodSandboxStatus{
			Id:    sandboxID,
			State: runtimeapi.PodSandboxState_SANDBOX_READY,
			Metadata: &runtimeapi.PodSandboxMetadata{
				Name: attrs[kubePodNameLabel], Namespace: attrs[kubePodNamespaceLabel], Uid: attrs[kubePodUIDLabel],
			},
		}
	}
	dockerLabels := make(map[string]string, len(attrs))
	for k, v := range attrs {
		switch k {
		case "image", "name", "exitCode", "signal", "execDuration":
		default:
			dockerLabels[k] = v
		}
	}
	labels, annotations := splitLabels(dockerLabels)
	st := &runtimeapi.PodSandboxStatus{
		Id:          sandboxID,
		Metadata:    sandboxMetadataOf(attrs["name"], attrs),
		State:       runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		Labels:      labels,
		Annotations: annotations,
	}
	if m.Action == "start" {
		st.State = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return st
}

// The labels the kubelet gives every container of a pod (upstream's
// kubelet/types labels), which Docker events carry as attributes.
const (
	kubePodNameLabel      = "io.kubernetes.pod.name"
	kubePodNamespaceLabel = "io.kubernetes.pod.namespace"
	kubePodUIDLabel       = "io.kubernetes.pod.uid"
)
