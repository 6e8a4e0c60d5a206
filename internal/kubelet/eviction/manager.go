package eviction

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/clock"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Upstream's timings.
const (
	// DefaultMonitoringInterval is how often the signals are sampled.
	DefaultMonitoringInterval = 10 * time.Second
	// DefaultPressureTransitionPeriod keeps a condition on after its pressure
	// was last seen (evictionPressureTransitionPeriod).
	DefaultPressureTransitionPeriod = 5 * time.Minute
	// immediateGracePeriod is the grace period of hard and local storage
	// evictions.
	immediateGracePeriod int64 = 1
	// podCleanupTimeout and podCleanupPollFreq bound the wait for an evicted
	// pod's resources to go before the next pass.
	podCleanupTimeout  = 30 * time.Second
	podCleanupPollFreq = time.Second
)

// Options configures a Manager.
type Options struct {
	// Thresholds are the parsed thresholds (ParseThresholdConfig).
	Thresholds []Threshold
	// PressureTransitionPeriod; 0 = 5m.
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriodSeconds bounds the grace period of soft evictions
	// (evictionMaxPodGracePeriod).
	MaxPodGracePeriodSeconds int64
	// LocalStorageCapacityIsolation enforces emptyDir sizeLimit and the
	// ephemeral-storage limits.
	LocalStorageCapacityIsolation bool
	// KernelMemcgNotification arms a memory cgroup threshold notification
	// for each memory threshold, so that a fast leak is caught between samples.
	KernelMemcgNotification bool
	// PodsCgroup is the node-allocatable cgroup (relative to the memory
	// controller's root), watched for allocatableMemory.available.
	PodsCgroup string
	// HugePagesBytes is the node's huge page capacity, taken off
	// memory.available (upstream's HugepageAwareEviction).
	HugePagesBytes int64
	// MonitoringInterval; 0 = 10s.
	MonitoringInterval time.Duration
	// Recorder records events about the evicted pods (with annotations) and
	// about the node (NodeRef); nil = none.
	Recorder record.EventRecorder
	NodeRef  *v1.ObjectReference
	// Registerer receives kubelet_evictions and
	// kubelet_eviction_stats_age_seconds; nil = not registered.
	Registerer prometheus.Registerer
	Logger     *zap.Logger
	Clock      clock.Clock
	// Deps are the parts it samples and acts through (the stats provider, the
	// kubelet's pod kills, clean-up check and container GC, the image GC).
	Deps Deps
}

// StatsProvider samples the node and its pods.
type StatsProvider interface {
	// NodeStats is the node's part of the summary (memory, filesystems,
	// runtime image filesystem, rlimit, system containers), without pods.
	NodeStats(ctx context.Context) (*statsapi.NodeStats, error)
	// Summary is the node and every pod.
	Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error)
	// HasDedicatedImageFs reports whether the runtime's images live on
	// another filesystem than the root dir.
	HasDedicatedImageFs(ctx context.Context) (bool, error)
}

// PodKiller stops a pod now with the grace period, after status updated its
// API status; it returns once the containers are stopped.
type PodKiller func(ctx context.Context, pod *v1.Pod, gracePeriodOverride int64, status func(*v1.PodStatus)) error

// Deps are the parts the manager samples and acts through; each is required
// once the manager has work (thresholds, or local storage isolation).
type Deps struct {
	Stats      StatsProvider
	ActivePods func() []*v1.Pod
	KillPod    PodKiller
	// PodCleanedUp reports whether an evicted pod's resources are reclaimed.
	PodCleanedUp func(*v1.Pod) bool
	// DeleteAllUnusedContainers and DeleteUnusedImages reclaim disk.
	DeleteAllUnusedContainers func(ctx context.Context) error
	DeleteUnusedImages        func(ctx context.Context) error
}

// Manager is the eviction manager; see the package doc.
type Manager struct {
	opts    Options
	log     *zap.Logger
	clock   clock.Clock
	metrics *metrics
	wake    chan struct{}
	done    sync.WaitGroup // the loop Start began

	// set on the first pass
	dedicatedImageFs *bool
	rank             map[string]rankFunc

	mu           sync.RWMutex
	conditions   map[v1.NodeConditionType]bool
	condLastSeen map[v1.NodeConditionType]time.Time
	firstAt      map[string]time.Time
	met          []Threshold
	lastObs      observations
	lastNode     *statsapi.NodeStats
}

// New wires a Manager; it starts nothing.
func New(opts Options) (*Manager, error) {
	if opts.PressureTransitionPeriod <= 0 {
		opts.PressureTransitionPeriod = DefaultPressureTransitionPeriod
	}
	if opts.MonitoringInterval <= 0 {
		opts.MonitoringInterval = DefaultMonitoringInterval
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
	return &Manager{opts: opts, log: opts.Logger, clock: opts.Clock, metrics: m, wake: make(chan struct{}, 1),
		conditions: map[v1.NodeConditionType]bool{}, condLastSeen: map[v1.NodeConditionType]time.Time{}}, nil
}

// IsUnderMemoryPressure reports the MemoryPressure condition.
func (m *Manager) IsUnderMemoryPressure() bool { return m.hasCondition(v1.NodeMemoryPressure) }

// IsUnderDiskPressure reports the DiskPressure condition.
func (m *Manager) IsUnderDiskPressure() bool { return m.hasCondition(v1.NodeDiskPressure) }

// IsUnderPIDPressure reports the PIDPressure condition.
func (m *Manager) IsUnderPIDPressure() bool { return m.hasCondition(v1.NodePIDPressure) }

func (m *Manager) hasCondition(c v1.NodeConditionType) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.conditions[c]
}

// Start begins sampling and acting every monitoring interval, until ctx
// ends (Wait waits for that); after an eviction the loop waits (at most 30s)
// for the pod's resources to go instead. Without thresholds nor local storage
// isolation there is nothing to do and nothing starts.
func (m *Manager) Start(ctx context.Context) error {
	if !m.hasWork() {
		return nil
	}
	d := m.opts.Deps
	if d.Stats == nil || d.ActivePods == nil || d.KillPod == nil || d.PodCleanedUp == nil {
		return errors.New("eviction: Deps needs Stats, ActivePods, KillPod and PodCleanedUp")
	}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		defer logging.HandleCrash(m.log, "eviction manager")
		m.run(ctx, d)
	}()
	return nil
}

// Wait returns once the loop Start began has ended.
func (m *Manager) Wait() { m.done.Wait() }

func (m *Manager) hasWork() bool {
	return len(m.opts.Thresholds) > 0 || m.opts.LocalStorageCapacityIsolation
}

// run is the loop of Start.
func (m *Manager) run(ctx context.Context, deps Deps) {
	if !m.hasWork() {
		return
	}
	var notifiers notifierSet
	defer notifiers.close()
	for {
		evicted := m.synchronize(ctx, deps)
		if m.opts.KernelMemcgNotification {
			notifiers.refresh(ctx, m)
		}
		if len(evicted) > 0 {
			m.waitForPodsCleanup(ctx, deps, evicted)
		} else {
			select {
			case <-ctx.Done():
			case <-m.clock.After(m.opts.MonitoringInterval):
			case <-m.wake:
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// waitForPodsCleanup waits until the evicted pods' resources are reclaimed.
func (m *Manager) waitForPodsCleanup(ctx context.Context, deps Deps, pods []*v1.Pod) {
	deadline := m.clock.Now().Add(podCleanupTimeout)
	for m.clock.Now().Before(deadline) {
		if !slices.ContainsFunc(pods, func(p *v1.Pod) bool { return !deps.PodCleanedUp(p) }) {
			m.log.Info("Eviction manager: pods successfully cleaned up", zap.Int("pods", len(pods)))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(podCleanupPollFreq):
		}
	}
	m.log.Warn("Eviction manager: timed out waiting for pods to be cleaned up", zap.Int("pods", len(pods)))
}

// synchronize is one pass: sample the signals, update the conditions, then
// enforce the local storage limits and, when a threshold is met, reclaim
// node-level resources or evict one pod. It returns the evicted pods.
func (m *Manager) synchronize(ctx context.Context, deps Deps) []*v1.Pod {
	if m.dedicatedImageFs == nil {
		d, err := deps.Stats.HasDedicatedImageFs(ctx)
		if err != nil {
			m.log.Error("Eviction manager: failed to get HasDedicatedImageFs", zap.Error(err))
			return nil
		}
		m.dedicatedImageFs, m.rank = &d, rankFuncs(d)
		m.log.Info("Eviction manager: started", zap.Bool("dedicatedImageFs", d), zap.Int("thresholds", len(m.opts.Thresholds)))
	}
	active := deps.ActivePods()
	node, err := deps.Stats.NodeStats(ctx)
	if err != nil {
		m.log.Error("Eviction manager: failed to get summary stats", zap.Error(err))
		return nil
	}
	obs := makeObservations(node, m.opts.HugePagesBytes)
	met := m.update(obs, node)
	needLocal := m.opts.LocalStorageCapacityIsolation && slices.ContainsFunc(active, hasLocalStorageLimit)
	if len(met) == 0 && !needLocal {
		return nil
	}
	summary, err := deps.Stats.Summary(ctx, false)
	if err != nil {
		m.log.Error("Eviction manager: failed to get summary stats", zap.Error(err))
		return nil
	}
	stats := podStatsOf(summary.Pods)
	if needLocal {
		if evicted := m.localStorageEviction(ctx, deps, active, stats); len(evicted) > 0 {
			return evicted
		}
	}
	if len(met) == 0 {
		m.log.Debug("Eviction manager: no resources are starved")
		return nil
	}
	return m.reclaim(ctx, deps, met, obs, active, stats)
}

// update folds one sample into the thresholds' and conditions' state and
// returns the thresholds that may act now: met (or not yet reclaimed past
// their minimum), past their grace period, on a sample newer than the last.
func (m *Manager) update(obs observations, node *statsapi.NodeStats) []Threshold {
	now := m.clock.Now()
	met := thresholdsMet(m.opts.Thresholds, obs, false)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.met) > 0 {
		met = mergeThresholds(met, thresholdsMet(m.met, obs, true))
	}
	m.firstAt = firstObservedAt(met, m.firstAt, now)
	for c := range conditionsOf(met) {
		m.condLastSeen[c] = now
	}
	m.conditions = conditionsObservedSince(m.condLastSeen, m.opts.PressureTransitionPeriod, now)
	met = metGracePeriod(met, m.firstAt, now)
	m.met = met
	last := m.lastObs
	m.lastObs, m.lastNode = obs, node
	return updatedStats(met, obs, last)
}

// podStatsOf indexes pod stats by UID.
func podStatsOf(pods []statsapi.PodStats) podStatsFunc {
	byUID := make(map[string]statsapi.PodStats, len(pods))
	for _, p := range pods {
		byUID[p.PodRef.UID] = p
	}
	return func(pod *v1.Pod) (statsapi.PodStats, bool) {
		s, ok := byUID[string(pod.UID)]
		return s, ok
	}
}
