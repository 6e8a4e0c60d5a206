package pleg

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// PodLifecycleEventType is the kind of a pod lifecycle event.
type PodLifecycleEventType string

// The event types (upstream names).
const (
	// ContainerStarted: a container (or sandbox) is now running.
	ContainerStarted PodLifecycleEventType = "ContainerStarted"
	// ContainerDied: a container (or sandbox) exited.
	ContainerDied PodLifecycleEventType = "ContainerDied"
	// ContainerRemoved: a container (or sandbox) is gone from the runtime.
	ContainerRemoved PodLifecycleEventType = "ContainerRemoved"
	// PodSync asks for a sync of the pod without a container change.
	PodSync PodLifecycleEventType = "PodSync"
	// ContainerChanged: a container moved to an unknown (or created) state. It
	// refreshes the cache but is not sent on the Watch channel.
	ContainerChanged PodLifecycleEventType = "ContainerChanged"
)

// PodLifecycleEvent says that something happened to a pod.
type PodLifecycleEvent struct {
	// ID is the pod's UID.
	ID k8stypes.UID
	// Type is what happened.
	Type PodLifecycleEventType
	// Data is the runtime container ID (without the runtime prefix) as a string.
	Data any
}

// Runtime is what the PLEG reads from the container runtime; *kuberuntime.Manager
// satisfies it.
type Runtime interface {
	GetPods(ctx context.Context, all bool) ([]*kubecontainer.Pod, error)
	GetPodStatus(ctx context.Context, uid k8stypes.UID, name, namespace string) (*kubecontainer.PodStatus, error)
}

const (
	// DefaultRelistPeriod is the generic PLEG's relist period (upstream 1s).
	DefaultRelistPeriod = time.Second
	// RelistThreshold: the PLEG is unhealthy when the last successful relist is older.
	RelistThreshold = 3 * time.Minute
	// eventChannelCapacity bounds the Watch channel; events beyond it are dropped
	// with a warning (the next relist or resync catches up).
	eventChannelCapacity = 1000
	// DefaultStatusReadTimeout bounds the read of one pod's status in a
	// relist, so that one container whose runtime calls hang cannot hold
	// every other pod's sync back (they wait for the relist's cache time).
	DefaultStatusReadTimeout = 20 * time.Second
	// maxStatusBackoff caps the pause before a pod whose status read timed
	// out is read again (the pause starts at the timeout and doubles).
	maxStatusBackoff = 2 * time.Minute
)

// Options configures a GenericPLEG.
type Options struct {
	// Runtime is the container runtime (required).
	Runtime Runtime
	// Cache receives pod statuses; nil: a new private cache.
	Cache *kubecontainer.Cache
	// RelistPeriod is the pause between relists; 0: DefaultRelistPeriod.
	RelistPeriod time.Duration
	// StatusReadTimeout bounds one pod's status read; 0: DefaultStatusReadTimeout.
	StatusReadTimeout time.Duration
	// Logger; nil: no logging.
	Logger *zap.Logger
	// Clock; nil: the real clock.
	Clock clock.Clock
	// Registerer receives upstream's PLEG series (kubelet_pleg_*,
	// kubelet_running_*, kubelet_evented_pleg_connection_*); nil: not registered.
	Registerer prometheus.Registerer
}

// GenericPLEG relists the runtime periodically; see the package doc.
type GenericPLEG struct {
	runtime Runtime
	cache   *kubecontainer.Cache
	logger  *zap.Logger
	clock   clock.Clock
	events  chan *PodLifecycleEvent
	metrics *metrics

	relistPeriod    atomic.Int64 // time.Duration
	relistThreshold atomic.Int64 // time.Duration
	lastRelist      atomic.Pointer[time.Time]
	kick            chan struct{} // buffered (1): relist now

	statusTimeout time.Duration

	relistMu        sync.Mutex // one relist at a time; guards the fields below
	records         podRecords
	podsToReinspect map[k8stypes.UID]*kubecontainer.Pod
	// slow holds the pods whose last status read timed out: they are read
	// again only after their back-off, their cache entry meanwhile the error.
	slow map[k8stypes.UID]statusBackoff
}

// statusBackoff is when a pod whose status read timed out is read again.
type statusBackoff struct {
	next    time.Time
	backoff time.Duration
}

// NewGeneric wires a GenericPLEG; Run starts it. It panics without a Runtime.
func NewGeneric(opts Options) (*GenericPLEG, error) {
	if opts.Runtime == nil {
		panic("pleg: Options.Runtime is required")
	}
	if opts.Cache == nil {
		opts.Cache = kubecontainer.NewCache()
	}
	if opts.RelistPeriod <= 0 {
		opts.RelistPeriod = DefaultRelistPeriod
	}
	if opts.StatusReadTimeout <= 0 {
		opts.StatusReadTimeout = DefaultStatusReadTimeout
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	p := &GenericPLEG{
		metrics:         m,
		runtime:         opts.Runtime,
		cache:           opts.Cache,
		logger:          opts.Logger.Named("pleg"),
		clock:           opts.Clock,
		events:          make(chan *PodLifecycleEvent, eventChannelCapacity),
		kick:            make(chan struct{}, 1),
		records:         podRecords{},
		podsToReinspect: map[k8stypes.UID]*kubecontainer.Pod{},
		statusTimeout:   opts.StatusReadTimeout,
		slow:            map[k8stypes.UID]statusBackoff{},
	}
	p.relistPeriod.Store(int64(opts.RelistPeriod))
	p.relistThreshold.Store(int64(RelistThreshold))
	return p, nil
}

// Watch returns the channel of lifecycle events. It is never closed; readers
// stop with their own context.
func (p *GenericPLEG) Watch() <-chan *PodLifecycleEvent { return p.events }

// Run relists until ctx ends: one relist, then a pause of the relist period
// (or until a relist is requested), and so on. After a relist that failed
// the pause is at most DefaultRelistPeriod: a slow period (the evented
// PLEG's) must not leave the cache stale for minutes after the runtime came
// back.
func (p *GenericPLEG) Run(ctx context.Context) {
	for {
		period := time.Duration(p.relistPeriod.Load())
		if !p.Relist(ctx) {
			period = min(period, DefaultRelistPeriod)
		}
		t := p.clock.NewTimer(period)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-p.kick:
			t.Stop()
		}
	}
}

// Healthy reports false once the last successful relist is older than the
// threshold (3 minutes), or before the first one. As upstream, it sets
// kubelet_pleg_last_seen_seconds to the last relist's time.
func (p *GenericPLEG) Healthy() (bool, error) {
	last := p.lastRelist.Load()
	if last == nil {
		return false, fmt.Errorf("pleg has yet to be successful")
	}
	p.metrics.lastSeen.Set(float64(last.Unix()))
	threshold := time.Duration(p.relistThreshold.Load())
	if elapsed := p.clock.Since(*last); elapsed > threshold {
		return false, fmt.Errorf("pleg was last seen active %v ago; threshold is %v", elapsed, threshold)
	}
	return true, nil
}

// setRelistPeriod changes the period and threshold (the evented PLEG slows the
// relist down while its event stream works) and relists at once.
func (p *GenericPLEG) setRelistPeriod(period, threshold time.Duration) {
	p.relistPeriod.Store(int64(period))
	p.relistThreshold.Store(int64(threshold))
	p.requestRelist()
}

// PodChanged needs nothing of the relist: a worker waits for a status newer
// than its last sync, which only a relist begun after that sync gives (the
// relist reads every pod whose containers changed, and moves the cache's
// global time to its own start).
func (p *GenericPLEG) PodChanged(k8stypes.UID, string, string) {}

// RequestPodReinspect has the next relist read the pod's status again even
// when none of its containers changed state (after an in-place resize, whose
// new resources no state change would bring into the cache).
func (p *GenericPLEG) RequestPodReinspect(uid k8stypes.UID) {
	p.relistMu.Lock()
	defer p.relistMu.Unlock()
	if _, ok := p.podsToReinspect[uid]; !ok {
		p.podsToReinspect[uid] = nil
	}
}

// requestRelist makes Run relist now instead of at the end of the period.
func (p *GenericPLEG) requestRelist() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Relist lists every pod of the runtime once, emits the events of what changed
// since the previous relist and refreshes the cache for the pods that changed
// (and for those whose status read failed last time). It reports whether the
// runtime could be listed.
func (p *GenericPLEG) Relist(ctx context.Context) bool {
	p.relistMu.Lock()
	defer p.relistMu.Unlock()

	timestamp := p.clock.Now()
	if last := p.lastRelist.Load(); last != nil {
		p.metrics.relistInterval.Observe(timestamp.Sub(*last).Seconds())
	}
	defer func() { p.metrics.relistDuration.Observe(p.clock.Since(timestamp).Seconds()) }()
	pods, err := p.runtime.GetPods(ctx, true)
	if err != nil {
		if ctx.Err() == nil {
			p.logger.Error("relist: list pods", zap.Error(err))
		}
		return false
	}
	p.lastRelist.Store(&timestamp)
	p.metrics.observeRunning(pods)
	p.records.setCurrent(pods)

	reinspect := map[k8stypes.UID]*kubecontainer.Pod{}
	for uid, rec := range p.records {
		events := podEvents(uid, rec.old, rec.current)
		_, retry := p.podsToReinspect[uid]
		if len(events) == 0 && !retry {
			continue
		}
		if b, ok := p.slow[uid]; ok && rec.current != nil && p.clock.Now().Before(b.next) {
			reinspect[uid] = rec.current // its cache entry stays the timeout error
			continue
		}
		if err := p.readStatus(ctx, uid, rec.current); err != nil {
			// Keep the old record so the events come again with the retry.
			reinspect[uid] = rec.current
			continue
		}
		if len(events) == 0 {
			// A reinspection always ends in a sync of the pod: what was read
			// (an in-place resize's new resources) reaches it without waiting
			// for the periodic resync (upstream's PodSync after a reinspect).
			events = append(events, &PodLifecycleEvent{ID: uid, Type: PodSync})
		}
		p.records.update(uid)
		p.send(events)
	}
	// Every pod is current as of timestamp: the changed ones were just read, the
	// others did not change.
	p.cache.UpdateTime(timestamp)
	p.podsToReinspect = reinspect
	return true
}

// readStatus is updateCache bounded by the status read timeout. A read that
// times out leaves its error in the pod's cache entry (the pod's worker sees
// it, the other pods' workers do not wait for it) and puts the pod in
// back-off: it is read again after the timeout, doubling up to
// maxStatusBackoff, and at once after a read that succeeds.
func (p *GenericPLEG) readStatus(ctx context.Context, uid k8stypes.UID, pod *kubecontainer.Pod) error {
	readCtx, cancel := context.WithTimeout(ctx, p.statusTimeout)
	defer cancel()
	err := p.updateCache(readCtx, uid, pod)
	switch {
	case err == nil:
		delete(p.slow, uid)
	case ctx.Err() == nil && errors.Is(readCtx.Err(), context.DeadlineExceeded):
		b := p.slow[uid]
		b.backoff = min(max(2*b.backoff, p.statusTimeout), maxStatusBackoff)
		b.next = p.clock.Now().Add(b.backoff)
		p.slow[uid] = b
		p.logger.Warn("relist: pod status read timed out; the pod is read again after a back-off",
			zap.String("podUID", string(uid)), zap.Duration("timeout", p.statusTimeout), zap.Duration("backoff", b.backoff))
	}
	return err
}

// updateCache reads the status of a pod into the cache; a pod gone from the
// runtime is deleted from it.
func (p *GenericPLEG) updateCache(ctx context.Context, uid k8stypes.UID, pod *kubecontainer.Pod) error {
	if pod == nil {
		p.cache.Delete(uid)
		return nil
	}
	ts := p.clock.Now()
	status, err := p.runtime.GetPodStatus(ctx, pod.ID, pod.Name, pod.Namespace)
	if err != nil {
		p.logger.Error("read pod status", zap.String("pod", pod.Namespace+"/"+pod.Name),
			zap.String("podUID", string(uid)), zap.Error(err))
		err = fmt.Errorf("read status of pod %s/%s (%s): %w", pod.Namespace, pod.Name, uid, err)
	} else {
		status.IPs = podIPs(p.cache, uid, status)
	}
	p.cache.Set(pod.ID, status, err, ts)
	return err
}

// send queues events for the sync loop, dropping (with a warning) what does not fit.
func (p *GenericPLEG) send(events []*PodLifecycleEvent) {
	for _, ev := range events {
		if ev.Type == ContainerChanged {
			continue
		}
		select {
		case p.events <- ev:
		default:
			p.logger.Warn("event channel is full, discarding pod lifecycle event",
				zap.String("podUID", string(ev.ID)), zap.String("type", string(ev.Type)))
		}
	}
}

// podIPs keeps the last known IPs of a pod whose sandbox is gone or not ready,
// so a terminated pod still reports the IPs it had (upstream behaviour).
func podIPs(cache *kubecontainer.Cache, uid k8stypes.UID, status *kubecontainer.PodStatus) []string {
	if len(status.IPs) != 0 {
		return status.IPs
	}
	old, err := cache.Get(uid)
	if err != nil || len(old.IPs) == 0 {
		return nil
	}
	for _, sb := range status.SandboxStatuses {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return status.IPs
		}
	}
	return old.IPs
}
