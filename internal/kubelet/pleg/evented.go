package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// EventSource streams CRI container events; internalapi.RuntimeService (the
// remote runtime client) satisfies it. GetContainerEvents blocks while the
// stream lasts, sending on ch, and calls connected once the stream is open.
type EventSource interface {
	GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connected func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
}

const (
	// DefaultFallbackRelistPeriod is the generic relist period while the event
	// stream works (upstream evented PLEG: 300s).
	DefaultFallbackRelistPeriod = 300 * time.Second
	// FallbackRelistThreshold is the health threshold while relisting slowly.
	FallbackRelistThreshold = 10 * time.Minute
	// DefaultMaxStreamRetries is how many consecutive stream failures the evented
	// PLEG tolerates before it stays on the generic relist for good.
	DefaultMaxStreamRetries = 5
	// DefaultStreamRetryBackoff is the pause before reopening a failed stream.
	DefaultStreamRetryBackoff = time.Second
	// cacheTickPeriod: while events flow, the cache's global timestamp moves
	// forward this often, since any change would have arrived as an event.
	cacheTickPeriod = time.Second
	// podChangedReadDelay is how long a pod the kubelet changed waits for the
	// change's event before it is read anyway.
	podChangedReadDelay = time.Second
)

// EventedOptions configures an EventedPLEG.
type EventedOptions struct {
	// Options configures the generic relist (RelistPeriod is the fast period used
	// while the stream is down).
	Options
	// Events is the CRI event stream (required).
	Events EventSource
	// FallbackRelistPeriod is the relist period while the stream works;
	// 0: DefaultFallbackRelistPeriod.
	FallbackRelistPeriod time.Duration
	// MaxStreamRetries; 0: DefaultMaxStreamRetries.
	MaxStreamRetries int
	// StreamRetryBackoff; 0: DefaultStreamRetryBackoff.
	StreamRetryBackoff time.Duration
}

// EventedPLEG refreshes pods from the runtime's container events, with the
// generic relist kept as a slower safety net (and as the fast fallback while
// the stream is down).
type EventedPLEG struct {
	generic      *GenericPLEG
	events       EventSource
	fastPeriod   time.Duration
	slowPeriod   time.Duration
	maxRetries   int
	retryBackoff time.Duration

	// Each pod's status is read on a goroutine of its own (so that a pod
	// whose runtime calls hang holds back no other), once for the events
	// that arrived while the previous read ran. A pod has an entry while its
	// reader runs.
	mu      sync.Mutex
	pending map[k8stypes.UID]*pendingRefresh
	readers sync.WaitGroup
	runCtx  context.Context // Run's; nil before Run
}

// pendingRefresh is a pod's read to do and the events to emit after it.
type pendingRefresh struct {
	md     *runtimeapi.PodSandboxMetadata
	events []*PodLifecycleEvent
	queued bool // a read is due
}

// NewEvented wires an EventedPLEG; Run starts it. It panics without Runtime or Events.
func NewEvented(opts EventedOptions) (*EventedPLEG, error) {
	if opts.Events == nil {
		panic("pleg: EventedOptions.Events is required")
	}
	g, err := NewGeneric(opts.Options)
	if err != nil {
		return nil, err
	}
	if opts.FallbackRelistPeriod <= 0 {
		opts.FallbackRelistPeriod = DefaultFallbackRelistPeriod
	}
	if opts.MaxStreamRetries <= 0 {
		opts.MaxStreamRetries = DefaultMaxStreamRetries
	}
	if opts.StreamRetryBackoff <= 0 {
		opts.StreamRetryBackoff = DefaultStreamRetryBackoff
	}
	return &EventedPLEG{
		generic:      g,
		events:       opts.Events,
		fastPeriod:   time.Duration(g.relistPeriod.Load()),
		slowPeriod:   opts.FallbackRelistPeriod,
		maxRetries:   opts.MaxStreamRetries,
		retryBackoff: opts.StreamRetryBackoff,
		pending:      map[k8stypes.UID]*pendingRefresh{},
	}, nil
}

// Watch returns the channel of lifecycle events (shared by the stream and the relist).
func (e *EventedPLEG) Watch() <-chan *PodLifecycleEvent { return e.generic.Watch() }

// Healthy reports the generic relist's health; its threshold is 10 minutes
// while the relist runs at the slow period.
func (e *EventedPLEG) Healthy() (bool, error) { return e.generic.Healthy() }

// Run runs the relist and the event stream until ctx ends.
func (e *EventedPLEG) Run(ctx context.Context) {
	e.mu.Lock()
	e.runCtx = ctx
	e.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer logging.HandleCrash(e.generic.logger, "pleg relist")
		e.generic.Run(ctx)
	}()
	e.runStream(ctx)
	wg.Wait()
	e.readers.Wait()
}

// runStream keeps the event stream open, falling back to the fast relist while
// it is down, and giving up on it after maxRetries consecutive failures.
func (e *EventedPLEG) runStream(ctx context.Context) {
	logger := e.generic.logger
	failures := 0
	for {
		connected, err := e.stream(ctx)
		e.generic.setRelistPeriod(e.fastPeriod, RelistThreshold)
		if ctx.Err() != nil {
			return
		}
		if connected {
			failures = 0
		}
		failures++
		if failures >= e.maxRetries {
			logger.Warn("container event stream keeps failing; relisting only",
				zap.Int("failures", failures), zap.Error(err))
			return
		}
		logger.Info("container event stream ended; relisting until it is back",
			zap.Int("failures", failures), zap.Error(err))
		t := e.generic.clock.NewTimer(e.retryBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// stream reads one event stream until it or ctx ends. connected reports
// whether the stream was ever open.
func (e *EventedPLEG) stream(ctx context.Context) (connected bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	ch := make(chan *runtimeapi.ContainerEventResponse, eventChannelCapacity)
	connCh := make(chan struct{})
	var once sync.Once
	errCh := make(chan error, 1)
	go func() {
		defer logging.HandleCrash(e.generic.logger, "pleg event stream")
		err := e.events.GetContainerEvents(sctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) {
			e.generic.metrics.connSuccess.Inc()
			once.Do(func() { close(connCh) })
		})
		if ctx.Err() == nil {
			e.generic.metrics.connErrors.Inc()
		}
		errCh <- err
	}()
	producerDone := false
	defer func() {
		cancel()
		// The producer may be blocked sending on ch; drain until it returns.
		for !producerDone {
			select {
			case <-ch:
			case <-errCh:
				producerDone = true
			}
		}
	}()

	tick := e.generic.clock.NewTimer(cacheTickPeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return connected, ctx.Err()
		case <-connCh:
			connCh, connected = nil, true
			// Slow the relist down; setRelistPeriod relists once now, which covers
			// whatever happened before the stream opened.
			e.generic.setRelistPeriod(e.slowPeriod, FallbackRelistThreshold)
		case ev := <-ch:
			e.handle(ctx, ev)
		case err := <-errCh:
			producerDone = true
			if err == nil {
				err = errors.New("stream closed")
			}
			return connected, fmt.Errorf("container events: %w", err)
		case <-tick.C():
			if connected {
				e.generic.cache.UpdateTime(e.generic.clock.Now())
			}
			tick.Reset(cacheTickPeriod)
		}
	}
}

// handle queues a read of the event's pod and its lifecycle event, which is
// sent once the read is done.
func (e *EventedPLEG) handle(ctx context.Context, ev *runtimeapi.ContainerEventResponse) {
	md := ev.GetPodSandboxStatus().GetMetadata()
	if md.GetUid() == "" {
		// Without the pod we cannot tell whose it is; let the relist find out.
		e.generic.requestRelist()
		return
	}
	if ev.GetCreatedAt() > 0 {
		e.generic.metrics.connLatency.Observe(e.generic.clock.Since(time.Unix(0, ev.GetCreatedAt())).Seconds())
	}
	var lifecycle *PodLifecycleEvent
	if t := eventType(ev.GetContainerEventType()); t != "" {
		lifecycle = &PodLifecycleEvent{ID: k8stypes.UID(md.GetUid()), Type: t, Data: ev.GetContainerId()}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queueRead(ctx, md, lifecycle)
}

// queueRead has the pod's status read (after the read that runs, if any),
// then ev sent (when not nil). Caller holds mu.
func (e *EventedPLEG) queueRead(ctx context.Context, md *runtimeapi.PodSandboxMetadata, ev *PodLifecycleEvent) {
	uid := k8stypes.UID(md.GetUid())
	p, reading := e.pending[uid]
	if !reading {
		p = &pendingRefresh{}
		e.pending[uid] = p
		e.readers.Add(1)
		go func() {
			defer logging.HandleCrash(e.generic.logger, "pleg pod read")
			e.readLoop(ctx, uid)
		}()
	}
	p.md, p.queued = md, true
	if ev != nil {
		p.events = append(p.events, ev)
	}
}

// PodChanged is told by the kubelet that it changed the pod in the runtime
// (started, stopped or removed something). Its own event may still be on its
// way, so the cache's global time, which moves every second while events
// flow, must not answer for the pod until a status read after the change is
// cached: the pod is marked in the cache. The change's event normally brings
// that read; when none came within podChangedReadDelay (a failed start may
// emit nothing), the pod is read then.
func (e *EventedPLEG) PodChanged(uid k8stypes.UID, name, namespace string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.runCtx == nil || e.runCtx.Err() != nil {
		return // not running: no read would clear the mark
	}
	at := e.generic.clock.Now()
	e.generic.cache.MarkChanged(uid, at)
	ctx, md := e.runCtx, &runtimeapi.PodSandboxMetadata{Uid: string(uid), Name: name, Namespace: namespace}
	e.afterFunc(podChangedReadDelay, func() {
		if !e.generic.cache.Unread(uid, at) {
			return
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if ctx.Err() == nil {
			e.queueRead(ctx, md, nil)
		}
	})
}

// afterFunc runs f after d on the PLEG's clock.
func (e *EventedPLEG) afterFunc(d time.Duration, f func()) {
	if c, ok := e.generic.clock.(clock.WithDelayedExecution); ok {
		c.AfterFunc(d, f)
		return
	}
	go func() {
		defer logging.HandleCrash(e.generic.logger, "pleg timer")
		<-e.generic.clock.After(d)
		f()
	}()
}

// readLoop reads the pod's status, and again as long as events came in
// meanwhile; each read's events are sent after it.
func (e *EventedPLEG) readLoop(ctx context.Context, uid k8stypes.UID) {
	defer e.readers.Done()
	defer logging.HandleCrash(e.generic.logger, "pleg pod status read")
	for {
		e.mu.Lock()
		p := e.pending[uid]
		if !p.queued || ctx.Err() != nil {
			delete(e.pending, uid)
			e.mu.Unlock()
			return
		}
		md, events := p.md, p.events
		p.queued, p.events = false, nil
		e.mu.Unlock()
		if e.refresh(ctx, uid, md) {
			e.generic.send(events)
		}
	}
}

// refresh reads a pod's status into the cache (the relist's read), bounded
// by the status read timeout; false when it could not (the error is cached
// and a relist asked for, which retries the pod).
func (e *EventedPLEG) refresh(ctx context.Context, uid k8stypes.UID, md *runtimeapi.PodSandboxMetadata) bool {
	readCtx, cancel := context.WithTimeout(ctx, e.generic.statusTimeout)
	defer cancel()
	pod := &kubecontainer.Pod{ID: uid, Name: md.GetName(), Namespace: md.GetNamespace()}
	if err := e.generic.updateCache(readCtx, uid, pod); err != nil {
		if ctx.Err() == nil {
			e.generic.RequestPodReinspect(uid)
			e.generic.requestRelist()
		}
		return false
	}
	if status, err := e.generic.cache.Get(uid); err == nil {
		e.generic.metrics.observePod(uid, status)
	}
	return true
}

// RequestPodReinspect has the pod's status read again at once (after an
// in-place resize, which no container event reports): the relist that reads
// it is asked for now rather than at the slow period.
func (e *EventedPLEG) RequestPodReinspect(uid k8stypes.UID) {
	e.generic.RequestPodReinspect(uid)
	e.generic.requestRelist()
}

// eventType maps a CRI event type; "" for events that only refresh the cache.
func eventType(t runtimeapi.ContainerEventType) PodLifecycleEventType {
	switch t {
	case runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT:
		return ContainerStarted
	case runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT:
		return ContainerDied
	case runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT:
		return ContainerRemoved
	}
	return ""
}
