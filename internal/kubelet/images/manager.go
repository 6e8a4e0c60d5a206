package images

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// Periods of Start's loops, as upstream (ImageGCPeriod and the image
// manager's detection and cache loops).
const (
	detectPeriod = 5 * time.Minute
	cachePeriod  = 30 * time.Second
	gcPeriod     = 5 * time.Minute
)

// ImageService is the part of the CRI image service the Manager uses;
// k8s.io/cri-api's internalapi.ImageManagerService satisfies it.
type ImageService interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
}

// ContainerLister is the CRI runtime service's ListContainers; the Manager
// calls it with a nil filter to see every container, running or exited.
type ContainerLister interface {
	ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error)
}

// FsStats gives the stats (capacity, available) of the image filesystem.
type FsStats interface {
	ImageFsStats(ctx context.Context) (*statsapi.FsStats, error)
}

// Options configures a Manager.
type Options struct {
	Images     ImageService    // required
	Containers ContainerLister // required
	Fs         FsStats         // required
	Policy     Policy
	// Recorder records events about the node (NodeRef); nil = none.
	Recorder   record.EventRecorder
	NodeRef    *v1.ObjectReference
	Registerer prometheus.Registerer // nil = metrics not registered
	Logger     *zap.Logger           // nil = nop
	Clock      clock.Clock           // nil = real
	// Tracer makes upstream's Images/GarbageCollect span (the kubelet's
	// tracing, scope TracerName); nil = none.
	Tracer trace.Tracer
	// PostGCHooks run after a collection removed images by age or for
	// space, with the IDs of the images left and the collection's start
	// (upstream's PostImageGCHook: the pull records prune theirs).
	PostGCHooks []PostGCHook
}

// PostGCHook reacts to a collection: remaining are the IDs of the images
// still on the node, gcStart when the collection began.
type PostGCHook func(ctx context.Context, remaining []string, gcStart time.Time)

// TracerName is the instrumentation scope of the image GC spans, upstream's.
const TracerName = "k8s.io/kubernetes/pkg/kubelet/images"

// Manager garbage-collects images and caches the image list. Its methods may
// be called concurrently; collections (GarbageCollect, DeleteUnusedImages and
// the periodic detection) run one at a time.
type Manager struct {
	tracer     trace.Tracer
	hooks      []PostGCHook
	images     ImageService
	containers ContainerLister
	fs         FsStats
	policy     Policy
	event      func(eventType, reason, message string)
	logger     *zap.Logger
	loops      lifecycle.Loops // what Start began
	clock      clock.Clock
	collected  *prometheus.CounterVec // kubelet_image_garbage_collected_total{reason}

	// gcSem is a one-slot semaphore: whoever holds it may detect and remove.
	gcSem chan struct{}

	recordsMu sync.Mutex
	records   map[string]*imageRecord // by image ID

	cacheMu sync.Mutex
	cache   []cachedImage // sorted by size, largest first
}

// New validates opts and builds a Manager. It does no I/O and starts nothing.
func New(opts Options) (*Manager, error) {
	switch {
	case opts.Images == nil:
		return nil, errors.New("images: Options.Images is required")
	case opts.Containers == nil:
		return nil, errors.New("images: Options.Containers is required")
	case opts.Fs == nil:
		return nil, errors.New("images: Options.Fs is required")
	}
	if err := opts.Policy.validate(); err != nil {
		return nil, err
	}
	collected, err := newCollectedTotal(opts.Registerer)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		images:     opts.Images,
		containers: opts.Containers,
		fs:         opts.Fs,
		policy:     opts.Policy,
		event:      kubecontainer.NodeEvents(opts.Recorder, opts.NodeRef),
		logger:     opts.Logger,
		clock:      opts.Clock,
		collected:  collected,
		gcSem:      make(chan struct{}, 1),
		records:    make(map[string]*imageRecord),
		tracer:     opts.Tracer,
		hooks:      opts.PostGCHooks,
	}
	if m.tracer == nil {
		m.tracer = noop.NewTracerProvider().Tracer(TracerName)
	}
	if m.logger == nil {
		m.logger = zap.NewNop()
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	return m, nil
}

// Start begins the Manager's loops, which run until ctx ends (Wait waits
// for them). Each loop runs at once, then again a period after it finished:
//   - image detection, every 5 minutes;
//   - the image list cache behind NodeImages, every 30 seconds;
//   - GarbageCollect, every 5 minutes, unless HighThresholdPercent is 100 and
//     MaxAge is 0. A failure right after a success is only logged (stats may
//     not be ready yet); every further consecutive failure also records a
//     Warning ImageGCFailed node event.
func (m *Manager) Start(ctx context.Context) error {
	beganGC := m.clock.Now()
	m.loops.Go(m.logger, "image detection", func() { m.every(ctx, detectPeriod, m.detectOnce) })
	m.loops.Go(m.logger, "image list cache", func() { m.every(ctx, cachePeriod, m.refreshCache) })
	if m.policy.gcDisabled() {
		m.logger.Info("ImageGCHighThresholdPercent is 100 and ImageMaximumGCAge is 0; image garbage collection is disabled")
		return nil
	}
	prevFailed := false
	m.loops.Go(m.logger, "image garbage collection", func() {
		m.every(ctx, gcPeriod, func(ctx context.Context) {
			prevFailed = m.periodicGC(ctx, beganGC, prevFailed)
		})
	})
	return nil
}

// Wait returns once the loops Start began have ended.
func (m *Manager) Wait() { m.loops.Wait() }

// every runs f at once and then period after each run ends, until ctx ends.
func (m *Manager) every(ctx context.Context, period time.Duration, f func(context.Context)) {
	for ctx.Err() == nil {
		f(ctx)
		t := m.clock.NewTimer(period)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// detectOnce refreshes the image records.
func (m *Manager) detectOnce(ctx context.Context) {
	if err := m.acquire(ctx); err != nil {
		return
	}
	defer m.release()
	if _, err := m.detectImages(ctx, m.clock.Now()); err != nil {
		m.logger.Info("Failed to monitor images", zap.Error(err))
	}
}

// periodicGC runs one collection and reports it; it returns whether the
// collection failed, to be passed back as prevFailed next time.
func (m *Manager) periodicGC(ctx context.Context, beganGC time.Time, prevFailed bool) bool {
	err := m.GarbageCollect(ctx, beganGC)
	switch {
	case err == nil && prevFailed:
		m.logger.Info("Image garbage collection succeeded")
	case err == nil:
		m.logger.Debug("Image garbage collection succeeded")
	case prevFailed:
		m.logger.Error("Image garbage collection failed multiple times in a row", zap.Error(err))
		m.event(eventTypeWarning, eventImageGCFailed, err.Error())
	default:
		m.logger.Error("Image garbage collection failed once. Stats initialization may not have completed yet", zap.Error(err))
	}
	return err != nil
}

// acquire takes the collection semaphore, or fails when ctx ends first.
func (m *Manager) acquire(ctx context.Context) error {
	select {
	case m.gcSem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (m *Manager) release() { <-m.gcSem }
