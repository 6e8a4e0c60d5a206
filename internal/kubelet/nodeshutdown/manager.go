package nodeshutdown

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/clock"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Admission of pods while the node shuts down (upstream's reason and message).
const (
	// NotAdmittedReason is the reason of a pod refused during a shutdown.
	NotAdmittedReason   = "NodeShutdown"
	notAdmittedMessage  = "Pod was rejected as the node is shutting down."
	shutdownEventReason = "Shutdown"
)

// Upstream's timings.
const (
	// reconnectPeriod is the pause before watching again after the bus
	// connection ended.
	reconnectPeriod = time.Second
	// delayPollFirst and delayPollSteps bound the wait for logind to apply a
	// new InhibitDelayMaxSec after its reload: 100ms, doubling, 5 reads.
	delayPollFirst = 100 * time.Millisecond
	delayPollSteps = 5
)

// errShuttingDown is what ShutdownStatus reports during a shutdown.
var errShuttingDown = errors.New("node is shutting down")

// Options configures a Manager.
type Options struct {
	// ShutdownGracePeriod is the whole time the node's shutdown is delayed
	// by; ShutdownGracePeriodCriticalPods is the part of it kept for critical
	// pods. Both are used when ByPodPriority is empty.
	ShutdownGracePeriod, ShutdownGracePeriodCriticalPods time.Duration
	// ByPodPriority (shutdownGracePeriodByPodPriority), when set, replaces
	// the two periods above with one group per priority.
	ByPodPriority []kubeletv1beta1.ShutdownGracePeriodByPodPriority
	// ActivePods lists the pods to stop.
	ActivePods func() []*v1.Pod
	// KillPod sets the pod's status with statusFn, stops it with the grace period (seconds) and waits (the kubelet's KillPodNow).
	KillPod func(ctx context.Context, pod *v1.Pod, gracePeriod int64, statusFn func(*v1.PodStatus)) error

	StateDir      string // the kubelet root dir (state file)
	LogindConfDir string // default /etc/systemd/logind.conf.d
	BusAddress    string // "" = the system bus (DBUS_SYSTEM_BUS_ADDRESS or the default socket)
	// Registerer receives kubelet_graceful_shutdown_start_time_seconds and
	// kubelet_graceful_shutdown_end_time_seconds; nil = not registered.
	Registerer prometheus.Registerer
	// Recorder records events about the node (NodeRef); nil = none.
	Recorder record.EventRecorder
	NodeRef  *v1.ObjectReference
	// SyncNodeStatus asks for a node status update at once, so that the
	// Ready=False "node is shutting down" (or its end) reaches the API
	// before the pods stop, as upstream. Optional; must not block.
	SyncNodeStatus func()
	Logger         *zap.Logger
	Clock          clock.Clock // nil = the real clock
}

// Manager delays the node's shutdown with a logind inhibitor lock and stops
// the pods in priority order before letting it go on.
//
// Its states, driven by logind's PrepareForShutdown signal:
//
//   - watching: the delay lock is held and pods are admitted.
//   - shutting down (PrepareForShutdown true): pods are refused, ShutdownStatus
//     reports an error (the node turns NotReady), the pods are stopped group
//     by group, then the lock is released so that the shutdown proceeds.
//   - cancelled (PrepareForShutdown false): the lock is taken again and pods
//     are admitted again; back to watching.
//
// When the bus connection ends, the manager connects again a second later.
type Manager struct {
	opts      Options
	log       *zap.Logger
	clock     clock.Clock
	groups    []kubeletv1beta1.ShutdownGracePeriodByPodPriority
	statePath string
	metrics   *metrics

	reconnectPeriod time.Duration
	delayPollFirst  time.Duration

	mu           sync.Mutex
	shuttingDown bool

	lockMu sync.Mutex
	lock   inhibitLock

	wg sync.WaitGroup // the background goroutines
}

// New checks o and builds a Manager; it registers the metrics but does not
// touch the bus.
func New(o Options) (*Manager, error) {
	switch {
	case o.ActivePods == nil:
		return nil, errors.New("nodeshutdown: ActivePods is required")
	case o.KillPod == nil:
		return nil, errors.New("nodeshutdown: KillPod is required")
	case o.StateDir == "":
		return nil, errors.New("nodeshutdown: StateDir is required")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.LogindConfDir == "" {
		o.LogindConfDir = DefaultLogindConfDir
	}
	met, err := newMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		opts:            o,
		log:             o.Logger.Named("nodeshutdown"),
		clock:           o.Clock,
		groups:          shutdownGroups(o.ShutdownGracePeriod, o.ShutdownGracePeriodCriticalPods, o.ByPodPriority),
		statePath:       filepath.Join(o.StateDir, stateFileName),
		metrics:         met,
		reconnectPeriod: reconnectPeriod,
		delayPollFirst:  delayPollFirst,
	}
	if m.enabled() {
		m.log.Info("Creating node shutdown manager",
			zap.Duration("shutdownGracePeriodRequested", o.ShutdownGracePeriod),
			zap.Duration("shutdownGracePeriodCriticalPods", o.ShutdownGracePeriodCriticalPods),
			zap.Any("shutdownGracePeriodByPodPriority", m.groups))
	}
	return m, nil
}

// enabled reports whether graceful shutdown is configured.
func (m *Manager) enabled() bool {
	return len(m.groups) > 0
}

// Start connects to logind, makes sure InhibitDelayMaxSec covers the grace
// period (writing the drop-in and reloading logind when it does not), takes
// the delay inhibitor lock and watches PrepareForShutdown until ctx ends.
// The watch runs in the background; Start returns once it is set up. With a
// zero grace period it does nothing (disabled). Where logind cannot be
// reached it returns an error the caller logs as a warning (the kubelet
// keeps running without graceful shutdown).
func (m *Manager) Start(ctx context.Context) error {
	if !m.enabled() {
		return nil
	}
	stopped, err := m.watch(ctx)
	if err != nil {
		return err
	}
	m.wg.Go(func() {
		defer logging.HandleCrash(m.log, "node shutdown watch")
		m.rewatch(ctx, stopped)
	})
	m.loadMetrics()
	return nil
}

// Wait returns once the background work Start began has ended (after its
// context ended): the watch, and the inhibit lock released.
func (m *Manager) Wait() { m.wg.Wait() }

// Admit refuses every pod while the node shuts down.
func (m *Manager) Admit(pod *v1.Pod) (reason, message string, ok bool) {
	if m.ShutdownStatus() != nil {
		return NotAdmittedReason, notAdmittedMessage, false
	}
	return "", "", true
}

// ShutdownStatus returns an error while the node is shutting down; the
// kubelet adds it to the Ready condition.
func (m *Manager) ShutdownStatus() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.shuttingDown {
		return errShuttingDown
	}
	return nil
}

// rewatch connects again each time a watch ends, until ctx ends; then it
// releases the lock a lost connection may have left held.
func (m *Manager) rewatch(ctx context.Context, stopped <-chan struct{}) {
	defer func() {
		if stopped != nil {
			<-stopped
		}
		if err := m.releaseLock(); err != nil {
			m.log.Error("Failed to release the inhibit lock", zap.Error(err))
		}
	}()
	for {
		if stopped != nil {
			select {
			case <-stopped:
			case <-ctx.Done():
				return
			}
		}
		t := m.clock.NewTimer(m.reconnectPeriod)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return
		}
		m.log.Debug("Restarting watch for node shutdown events")
		var err error
		if stopped, err = m.watch(ctx); err != nil {
			m.log.Error("Unable to watch the node for shutdown events", zap.Error(err))
		}
	}
}

// watch runs the steps of one connection to logind:
//  1. connect to the bus;
//  2. raise InhibitDelayMaxSec if it is shorter than the grace period;
//  3. take the delay lock (releasing the one of a previous connection);
//  4. subscribe to PrepareForShutdown and handle it in the background.
//
// The returned channel is closed when the connection or ctx ends.
func (m *Manager) watch(ctx context.Context) (_ <-chan struct{}, retErr error) {
	bus, err := dialLogind(m.opts.BusAddress, m.opts.LogindConfDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			if err := bus.Close(); err != nil {
				m.log.Error("Failed to close dbus connection after start failure", zap.Error(err))
			}
		}
	}()
	if err := m.ensureInhibitDelay(ctx, bus); err != nil {
		return nil, err
	}
	if err := m.acquireLock(ctx, bus); err != nil {
		return nil, err
	}
	events, err := bus.monitor(ctx.Done(), func(msg string) { m.log.Error(msg) })
	if err != nil {
		if relErr := m.releaseLock(); relErr != nil {
			return nil, fmt.Errorf("failed releasing inhibitLock: %v and failed monitoring shutdown: %w", relErr, err)
		}
		return nil, fmt.Errorf("failed to monitor shutdown: %w", err)
	}
	stopped := make(chan struct{})
	m.wg.Go(func() {
		defer close(stopped)
		defer logging.HandleCrash(m.log, "node shutdown events")
		m.handleEvents(ctx, bus, events)
	})
	return stopped, nil
}

// ensureInhibitDelay raises logind's InhibitDelayMaxSec to the total grace
// period when it is shorter: it writes the drop-in, reloads logind and reads
// the value again until it is applied.
func (m *Manager) ensureInhibitDelay(ctx context.Context, bus *logindConn) error {
	current, err := bus.inhibitDelay(ctx)
	if err != nil {
		return err
	}
	want := totalGracePeriod(m.groups)
	if want <= current {
		return nil
	}
	if err := bus.overrideInhibitDelay(want); err != nil {
		return fmt.Errorf("unable to override inhibit delay by shutdown manager: %w", err)
	}
	if err := bus.reload(ctx); err != nil {
		return err
	}
	wait := m.delayPollFirst
	for attempt := 1; ; attempt++ {
		updated, err := bus.inhibitDelay(ctx)
		if err != nil {
			return err
		}
		if want <= updated {
			return nil
		}
		if attempt == delayPollSteps {
			return fmt.Errorf("node shutdown manager was timed out after %d attempts waiting for logind InhibitDelayMaxSec to update to %v (ShutdownGracePeriod), current value is %v", attempt, want, updated)
		}
		m.log.Debug("InhibitDelayMaxSec still less than requested, retrying",
			zap.Int("attempt", attempt), zap.Duration("current", updated), zap.Duration("requested", want))
		if err := sleep(ctx, m.clock, wait); err != nil {
			return err
		}
		wait *= 2
	}
}

func sleep(ctx context.Context, c clock.Clock, d time.Duration) error {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// acquireLock takes a new delay lock, then releases the one held before.
func (m *Manager) acquireLock(ctx context.Context, bus *logindConn) error {
	lock, err := bus.inhibit(ctx)
	if err != nil {
		return err
	}
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	old := m.lock
	m.lock = lock
	if err := releaseLock(&old); err != nil {
		m.log.Error("Failed to release the previous inhibit lock", zap.Error(err))
	}
	return nil
}

// releaseLock releases the held lock, if any.
func (m *Manager) releaseLock() error {
	m.lockMu.Lock()
	defer m.lockMu.Unlock()
	return releaseLock(&m.lock)
}

// handleEvents follows logind's inhibitor protocol until the connection or
// ctx ends, then closes the connection. When ctx ends the lock is released
// too: nothing would act on a shutdown any more.
func (m *Manager) handleEvents(ctx context.Context, bus *logindConn, events <-chan bool) {
	defer bus.Close()
	for m.nextEvent(ctx, bus, events) {
	}
	if ctx.Err() != nil {
		if err := m.releaseLock(); err != nil {
			m.log.Error("Failed to release the inhibit lock", zap.Error(err))
		}
	}
}

// nextEvent handles one event; false means the watch is over.
func (m *Manager) nextEvent(ctx context.Context, bus *logindConn, events <-chan bool) bool {
	select {
	case <-ctx.Done():
		return false
	case active, ok := <-events:
		if !ok {
			if ctx.Err() == nil {
				m.log.Error("Ended to watching the node for shutdown events")
			}
			return false
		}
		m.handleEvent(ctx, bus, active)
		return true
	}
}

// handleEvent acts on one PrepareForShutdown: true stops the pods and
// releases the lock, false (a cancelled shutdown) takes the lock again.
func (m *Manager) handleEvent(ctx context.Context, bus *logindConn, active bool) {
	kind, msg := "shutdown", "Shutdown manager detected shutdown event"
	if !active {
		kind, msg = "cancelled", "Shutdown manager detected shutdown cancellation"
	}
	m.log.Debug("Shutdown manager detected new shutdown event", zap.String("event", kind))
	kubecontainer.NodeEvents(m.opts.Recorder, m.opts.NodeRef)(v1.EventTypeNormal, shutdownEventReason, msg)
	m.mu.Lock()
	m.shuttingDown = active
	m.mu.Unlock()
	if m.opts.SyncNodeStatus != nil {
		m.opts.SyncNodeStatus()
	}
	if !active {
		if err := m.acquireLock(ctx, bus); err != nil {
			m.log.Error("Failed to take the inhibit lock again after the shutdown was cancelled", zap.Error(err))
		}
		return
	}
	if err := m.processShutdown(ctx); err != nil {
		m.log.Error("Shutdown manager failed to process shutdown event", zap.Error(err))
	}
}

// processShutdown records the start in the state file and metrics, stops
// the active pods by priority, records the end and releases the lock.
func (m *Manager) processShutdown(ctx context.Context) error {
	m.log.Debug("Shutdown manager processing shutdown event")
	pods := m.opts.ActivePods()
	defer func() {
		if err := m.releaseLock(); err != nil {
			m.log.Error("Failed to release the inhibit lock", zap.Error(err))
		}
		m.log.Debug("Shutdown manager completed processing shutdown event, node will shutdown shortly")
	}()

	start := m.clock.Now()
	m.storeState(shutdownState{StartTime: start})
	m.metrics.start.Set(unixSeconds(start))
	m.metrics.end.Set(0)
	defer func() {
		end := m.clock.Now()
		m.storeState(shutdownState{StartTime: start, EndTime: end})
		m.metrics.end.Set(unixSeconds(end))
	}()

	return m.killPods(ctx, pods)
}

func (m *Manager) storeState(st shutdownState) {
	if err := storeState(m.statePath, st); err != nil {
		m.log.Error("Failed to store graceful shutdown state", zap.Error(err))
	}
}

// loadMetrics sets the gauges from the state file of the last shutdown.
func (m *Manager) loadMetrics() {
	st, err := loadState(m.statePath)
	if err != nil {
		m.log.Error("Failed to load graceful shutdown state", zap.Error(err))
		return
	}
	if !st.StartTime.IsZero() {
		m.metrics.start.Set(unixSeconds(st.StartTime))
	}
	if !st.EndTime.IsZero() {
		m.metrics.end.Set(unixSeconds(st.EndTime))
	}
}
