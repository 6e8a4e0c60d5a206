package nodeshutdown

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

// fakeKubelet provides ActivePods and KillPod and records the kills.
type fakeKubelet struct {
	pods []*v1.Pod

	mu    sync.Mutex
	kills []killRecord
	block map[string]chan struct{} // pod name -> KillPod waits for it
}

type killRecord struct {
	pod    string
	grace  int64
	status v1.PodStatus
}

func (k *fakeKubelet) activePods() []*v1.Pod { return k.pods }

func (k *fakeKubelet) killPod(ctx context.Context, pod *v1.Pod, grace int64, statusFn func(*v1.PodStatus)) error {
	st := *pod.Status.DeepCopy()
	statusFn(&st)
	k.mu.Lock()
	k.kills = append(k.kills, killRecord{pod: pod.Name, grace: grace, status: st})
	ch := k.block[pod.Name]
	k.mu.Unlock()
	if ch != nil {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (k *fakeKubelet) killed() []killRecord {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.kills)
}

func (k *fakeKubelet) killedNames() []string {
	var names []string
	for _, r := range k.killed() {
		names = append(names, r.pod)
	}
	return names
}

var testNode = &v1.ObjectReference{Kind: "Node", Name: "n"}

func testPod(name string, priority *int32, grace *int64) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), Generation: 3},
		Spec:       v1.PodSpec{Priority: priority, TerminationGracePeriodSeconds: grace},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
}

func ptr[T any](v T) *T { return &v }

type testEnv struct {
	bus     string
	logind  *fakeLogind
	kubelet *fakeKubelet
	events  *eventtest.Recorder
	reg     *prometheus.Registry
	opts    Options
}

// newTestEnv starts a bus with a fake logind whose InhibitDelayMaxSec is
// delay, and returns Options wired to it with a 30s/10s grace period.
func newTestEnv(t *testing.T, delay time.Duration) *testEnv {
	t.Helper()
	env := &testEnv{
		bus:     startBus(t),
		kubelet: &fakeKubelet{},
		events:  &eventtest.Recorder{},
		reg:     prometheus.NewRegistry(),
	}
	confDir := filepath.Join(t.TempDir(), "logind.conf.d")
	env.logind = newFakeLogind(t, env.bus, confDir, delay)
	env.opts = Options{
		ShutdownGracePeriod:             30 * time.Second,
		ShutdownGracePeriodCriticalPods: 10 * time.Second,
		ActivePods:                      env.kubelet.activePods,
		KillPod:                         env.kubelet.killPod,
		StateDir:                        t.TempDir(),
		LogindConfDir:                   confDir,
		BusAddress:                      env.bus,
		Registerer:                      env.reg,
		Recorder:                        env.events,
		NodeRef:                         testNode,
		Logger:                          zaptest.NewLogger(t),
	}
	return env
}

// start runs m until the test ends, then checks that every goroutine ended.
func start(t *testing.T, m *Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		cancel()
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		m.wg.Wait()
	})
}

func mustNew(t *testing.T, o Options) *Manager {
	t.Helper()
	m, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	k := &fakeKubelet{}
	full := Options{ActivePods: k.activePods, KillPod: k.killPod, StateDir: t.TempDir()}
	for _, tc := range []struct {
		desc   string
		mutate func(*Options)
		want   string
	}{
		{desc: "no ActivePods", mutate: func(o *Options) { o.ActivePods = nil }, want: "ActivePods is required"},
		{desc: "no KillPod", mutate: func(o *Options) { o.KillPod = nil }, want: "KillPod is required"},
		{desc: "no StateDir", mutate: func(o *Options) { o.StateDir = "" }, want: "StateDir is required"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			o := full
			tc.mutate(&o)
			if _, err := New(o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New() error = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestDisabled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc            string
		grace, critical time.Duration
	}{
		{desc: "zero grace period"},
		{desc: "critical period longer than the whole", grace: 10 * time.Second, critical: 20 * time.Second},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			k := &fakeKubelet{}
			confDir := filepath.Join(t.TempDir(), "conf")
			m := mustNew(t, Options{
				ShutdownGracePeriod: tc.grace, ShutdownGracePeriodCriticalPods: tc.critical,
				ActivePods: k.activePods, KillPod: k.killPod, StateDir: t.TempDir(),
				LogindConfDir: confDir, BusAddress: "unix:path=/nonexistent/bus",
				Logger: zaptest.NewLogger(t),
			})
			if err := m.Start(context.Background()); err != nil {
				t.Fatalf("Start of a disabled manager: %v", err)
			}
			if _, _, ok := m.Admit(testPod("p", nil, nil)); !ok {
				t.Error("a disabled manager refused a pod")
			}
			if err := m.ShutdownStatus(); err != nil {
				t.Errorf("ShutdownStatus() = %v", err)
			}
			if _, err := os.Stat(confDir); !os.IsNotExist(err) {
				t.Errorf("a disabled manager touched the logind conf dir: %v", err)
			}
		})
	}
}

func TestStartRaisesInhibitDelay(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, 5*time.Second)
	m := mustNew(t, env.opts)
	start(t, m)

	b, err := os.ReadFile(filepath.Join(env.opts.LogindConfDir, "99-kubelet.conf"))
	if err != nil {
		t.Fatalf("drop-in: %v", err)
	}
	if want := "# Kubelet logind override\n[Login]\nInhibitDelayMaxSec=30\n"; string(b) != want {
		t.Errorf("drop-in = %q, want %q", b, want)
	}
	if got, want := env.logind.killUnitCalls(), []killUnitCall{{Unit: "systemd-logind.service", Who: "all", Signal: 1}}; !slices.Equal(got, want) {
		t.Errorf("KillUnit calls = %+v, want %+v", got, want)
	}
	if got := env.logind.delay(); got != 30*time.Second {
		t.Errorf("logind InhibitDelayMaxSec = %v after the reload, want 30s", got)
	}
	locks := env.logind.lockList()
	if len(locks) != 1 {
		t.Fatalf("%d inhibitor locks taken, want 1", len(locks))
	}
	want := fakeLock{What: "shutdown", Who: "kubelet", Why: "Kubelet needs time to handle node shutdown", Mode: "delay"}
	if l := locks[0]; l.What != want.What || l.Who != want.Who || l.Why != want.Why || l.Mode != want.Mode {
		t.Errorf("Inhibit(%q, %q, %q, %q), want Inhibit(%q, %q, %q, %q)", l.What, l.Who, l.Why, l.Mode, want.What, want.Who, want.Why, want.Mode)
	}
	locks[0].waitReceived(t)
	time.Sleep(50 * time.Millisecond)
	if locks[0].isReleased() {
		t.Error("the inhibitor lock was released without a shutdown")
	}
}

func TestStartKeepsLargeEnoughInhibitDelay(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, 60*time.Second)
	// The state file of an earlier shutdown sets the metrics at start.
	prev := shutdownState{StartTime: time.Unix(1600000000, 0), EndTime: time.Unix(1600000025, 0)}
	if err := storeState(filepath.Join(env.opts.StateDir, stateFileName), prev); err != nil {
		t.Fatal(err)
	}
	m := mustNew(t, env.opts)
	start(t, m)

	if _, err := os.Stat(env.opts.LogindConfDir); !os.IsNotExist(err) {
		t.Errorf("drop-in dir written although InhibitDelayMaxSec was enough: %v", err)
	}
	if calls := env.logind.killUnitCalls(); len(calls) != 0 {
		t.Errorf("logind reloaded although InhibitDelayMaxSec was enough: %+v", calls)
	}
	if n := len(env.logind.lockList()); n != 1 {
		t.Errorf("%d inhibitor locks taken, want 1", n)
	}
	if got := testutil.ToFloat64(m.metrics.start); got != 1600000000 {
		t.Errorf("start time metric = %v, want 1600000000", got)
	}
	if got := testutil.ToFloat64(m.metrics.end); got != 1600000025 {
		t.Errorf("end time metric = %v, want 1600000025", got)
	}
}

func TestStartFailsWhenLogindKeepsOldDelay(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, 5*time.Second)
	env.logind.setIgnoreReload()
	m := mustNew(t, env.opts)
	m.delayPollFirst = time.Millisecond
	err := m.Start(context.Background())
	want := "node shutdown manager was timed out after 5 attempts waiting for logind InhibitDelayMaxSec to update to 30s (ShutdownGracePeriod), current value is 5s"
	if err == nil || err.Error() != want {
		t.Fatalf("Start() error = %v, want %q", err, want)
	}
	if n := len(env.logind.lockList()); n != 0 {
		t.Errorf("%d inhibitor locks taken after a failed start, want 0", n)
	}
}

func TestStartWithoutLogind(t *testing.T) {
	t.Parallel()
	k := &fakeKubelet{}
	base := Options{
		ShutdownGracePeriod: 30 * time.Second,
		ActivePods:          k.activePods, KillPod: k.killPod, StateDir: t.TempDir(),
		LogindConfDir: t.TempDir(), Logger: zaptest.NewLogger(t),
	}
	t.Run("bus unreachable", func(t *testing.T) {
		o := base
		o.BusAddress = "unix:path=" + filepath.Join(t.TempDir(), "no-bus")
		err := mustNew(t, o).Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "unable to connect to the system bus at "+o.BusAddress+" to reach logind") {
			t.Fatalf("Start() error = %v, want a connection error", err)
		}
	})
	t.Run("no logind on the bus", func(t *testing.T) {
		o := base
		o.BusAddress = startBus(t)
		err := mustNew(t, o).Start(context.Background())
		if err == nil || !strings.Contains(err.Error(), "failed reading InhibitDelayMaxUSec property from logind") {
			t.Fatalf("Start() error = %v, want a logind error", err)
		}
	})
}

func TestShutdownAndCancel(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, time.Minute)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	env.opts.Clock = clocktesting.NewFakeClock(now)
	env.kubelet.pods = []*v1.Pod{
		testPod("short", nil, ptr[int64](5)),
		testPod("long", ptr[int32](0), ptr[int64](100)),
		testPod("critical", ptr[int32](2000000000), ptr[int64](3)),
		testPod("node-critical", ptr[int32](2000001000), nil),
	}
	releaseCritical := make(chan struct{})
	env.kubelet.block = map[string]chan struct{}{"node-critical": releaseCritical}
	var syncs atomic.Int32
	env.opts.SyncNodeStatus = func() { syncs.Add(1) }
	m := mustNew(t, env.opts)
	start(t, m)
	first := env.logind.lockList()[0]
	first.waitReceived(t)

	env.logind.prepareForShutdown(true)
	if !waitFor(func() bool { return len(env.kubelet.killed()) == 4 }, 5*time.Second) {
		t.Fatalf("killed %v, want all 4 pods", env.kubelet.killedNames())
	}
	if syncs.Load() != 1 {
		t.Errorf("%d node status syncs asked at the shutdown, want 1", syncs.Load())
	}
	if err := m.ShutdownStatus(); err == nil || err.Error() != "node is shutting down" {
		t.Errorf("ShutdownStatus() = %v, want \"node is shutting down\"", err)
	}
	reason, msg, ok := m.Admit(testPod("new", nil, nil))
	if ok || reason != "NodeShutdown" || msg != "Pod was rejected as the node is shutting down." {
		t.Errorf("Admit() = %q, %q, %v; want a NodeShutdown rejection", reason, msg, ok)
	}
	time.Sleep(50 * time.Millisecond)
	if first.isReleased() {
		t.Fatal("the lock was released while a critical pod was still stopping")
	}
	close(releaseCritical)
	select {
	case <-first.released:
	case <-time.After(5 * time.Second):
		t.Fatal("the lock was not released after the pods stopped")
	}

	checkKills(t, env.kubelet.killed(), now)
	checkStateAndMetrics(t, env, now)

	env.logind.prepareForShutdown(false)
	if !waitFor(func() bool { return len(env.logind.lockList()) == 2 && m.ShutdownStatus() == nil }, 5*time.Second) {
		t.Fatalf("after the cancellation: %d locks, ShutdownStatus %v", len(env.logind.lockList()), m.ShutdownStatus())
	}
	if _, _, ok := m.Admit(testPod("new", nil, nil)); !ok {
		t.Error("pods still refused after the shutdown was cancelled")
	}
	second := env.logind.lockList()[1]
	second.waitReceived(t)
	time.Sleep(50 * time.Millisecond)
	if second.isReleased() {
		t.Error("the new lock was released")
	}
	wantEvents := []string{
		"Normal Shutdown Shutdown manager detected shutdown event",
		"Normal Shutdown Shutdown manager detected shutdown cancellation",
	}
	env.events.About(t, testNode)
	if got := env.events.Strings(); !slices.Equal(got, wantEvents) {
		t.Errorf("events = %q, want %q", got, wantEvents)
	}
}

// checkKills checks that ordinary pods went first with
// min(terminationGracePeriodSeconds, 20s), then critical ones with at most
// 10s, each with upstream's status.
func checkKills(t *testing.T, kills []killRecord, now time.Time) {
	t.Helper()
	grace := map[string]int64{}
	order := map[string]int{}
	for i, k := range kills {
		grace[k.pod], order[k.pod] = k.grace, i
		want := v1.PodStatus{
			Phase:   v1.PodFailed,
			Reason:  "Terminated",
			Message: "Pod was terminated in response to imminent node shutdown.",
			Conditions: []v1.PodCondition{{
				Type:               v1.DisruptionTarget,
				ObservedGeneration: 3,
				Status:             v1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(now),
				Reason:             "TerminationByKubelet",
				Message:            "Pod was terminated in response to imminent node shutdown.",
			}},
		}
		if !equalJSON(k.status, want) {
			t.Errorf("status of %s = %+v, want %+v", k.pod, k.status, want)
		}
	}
	wantGrace := map[string]int64{"short": 5, "long": 20, "critical": 3, "node-critical": 10}
	for pod, g := range wantGrace {
		if grace[pod] != g {
			t.Errorf("grace period of %s = %d, want %d", pod, grace[pod], g)
		}
	}
	for _, ordinary := range []string{"short", "long"} {
		for _, critical := range []string{"critical", "node-critical"} {
			if order[ordinary] > order[critical] {
				t.Errorf("%s was stopped before %s", critical, ordinary)
			}
		}
	}
}

func checkStateAndMetrics(t *testing.T, env *testEnv, now time.Time) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.opts.StateDir, "graceful_node_shutdown_state"))
	if err != nil {
		t.Fatalf("state file: %v", err)
	}
	var st struct{ StartTime, EndTime time.Time }
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state file %q: %v", b, err)
	}
	if !st.StartTime.Equal(now) || !st.EndTime.Equal(now) {
		t.Errorf("state file = %s, want start and end %v", b, now)
	}
	want := `
# HELP kubelet_graceful_shutdown_end_time_seconds [ALPHA] Last graceful shutdown end time since unix epoch in seconds
# TYPE kubelet_graceful_shutdown_end_time_seconds gauge
kubelet_graceful_shutdown_end_time_seconds 1.7723664e+09
# HELP kubelet_graceful_shutdown_start_time_seconds [ALPHA] Last graceful shutdown start time since unix epoch in seconds
# TYPE kubelet_graceful_shutdown_start_time_seconds gauge
kubelet_graceful_shutdown_start_time_seconds 1.7723664e+09
`
	if err := testutil.GatherAndCompare(env.reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func equalJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

func TestStopsWatchingWhenContextEnds(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, time.Minute)
	m := mustNew(t, env.opts)
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	env.logind.lockList()[0].waitReceived(t)
	cancel()
	m.wg.Wait()
	select {
	case <-env.logind.lockList()[0].released:
	case <-time.After(5 * time.Second):
		t.Fatal("the lock is still held after ctx ended")
	}
}

func TestWatchesAgainAfterBusLoss(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "bus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	address, stop := runBus(t, dir)
	confDir := t.TempDir()
	logind := newFakeLogind(t, address, confDir, time.Minute)
	k := &fakeKubelet{}
	m := mustNew(t, Options{
		ShutdownGracePeriod: 30 * time.Second,
		ActivePods:          k.activePods, KillPod: k.killPod, StateDir: t.TempDir(),
		LogindConfDir: confDir, BusAddress: address, Logger: zaptest.NewLogger(t),
	})
	m.reconnectPeriod = 10 * time.Millisecond
	start(t, m)
	first := logind.lockList()[0]
	first.waitReceived(t)

	// The bus goes away; the manager keeps its lock and retries until a
	// bus with logind is back, then swaps the old lock for a new one.
	stop()
	time.Sleep(50 * time.Millisecond)
	if first.isReleased() {
		t.Fatal("the lock was released when the bus went away")
	}
	address2, _ := runBus(t, dir) // same socket, new guid
	logind2 := newFakeLogind(t, address2, confDir, time.Minute)
	if !waitFor(func() bool { return len(logind2.lockList()) == 1 }, 5*time.Second) {
		t.Fatal("the manager did not take a lock on the new bus")
	}
	logind2.lockList()[0].waitReceived(t)
	select {
	case <-first.released:
	case <-time.After(5 * time.Second):
		t.Fatal("the lock of the lost connection was not released")
	}
	// The old lock goes when the new one is taken, before the subscription.
	if !shutdownActedOn(logind2, m) {
		t.Fatal("the manager does not watch the new bus")
	}
}

// shutdownActedOn sends logind's PrepareForShutdown(true) until the manager
// acts on one, for at most 10 s. The subscription to it follows the lock
// (upstream's order), so a signal sent right after the lock was taken may
// not be seen.
func shutdownActedOn(logind *fakeLogind, m *Manager) bool {
	return waitFor(func() bool {
		logind.prepareForShutdown(true)
		return waitFor(func() bool { return m.ShutdownStatus() != nil }, 250*time.Millisecond)
	}, 10*time.Second)
}

// TestSignalsOnlyFromLogind (issue 27 item 3): a PrepareForShutdown that
// another connection emits with logind's path and interface (any local user
// can, with dbus-send) changes nothing; logind's own is acted on.
func TestSignalsOnlyFromLogind(t *testing.T) {
	t.Parallel()
	env := newTestEnv(t, time.Minute)
	logind := env.logind
	m := mustNew(t, env.opts)
	start(t, m)
	logind.lockList()[0].waitReceived(t)

	impostor, err := dbus.Connect(env.bus)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { impostor.Close() })
	// Sent every 50 ms for 2 s: some arrive once the manager is subscribed.
	for range 40 {
		if err := impostor.Emit(logindPath, logindInterface+"."+prepareForShutdown, true); err != nil {
			t.Fatal(err)
		}
		if waitFor(func() bool { return m.ShutdownStatus() != nil }, 50*time.Millisecond) {
			t.Fatal("a PrepareForShutdown from another connection than logind's started the shutdown")
		}
	}
	if !shutdownActedOn(logind, m) {
		t.Fatal("logind's PrepareForShutdown was not acted on")
	}
}
