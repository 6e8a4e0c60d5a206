package eviction

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testingclock "k8s.io/utils/clock/testing"
)

// env is a Manager wired to fakes; synchronize is called directly.
type env struct {
	m      *Manager
	stats  *fakeStats
	killer *fakeKiller
	rec    *fakeRecorder
	clock  *testingclock.FakeClock
	reg    *prometheus.Registry
	deps   Deps

	mu        sync.Mutex
	pods      []*v1.Pod
	steps     []string          // node-level reclaim calls, in order
	onReclaim func(step string) // runs in a reclaim call (may change the stats)
}

func newEnv(t *testing.T, opts Options, dedicated bool, pods ...*v1.Pod) *env {
	t.Helper()
	e := &env{stats: &fakeStats{dedicated: dedicated}, killer: &fakeKiller{}, rec: &fakeRecorder{},
		clock: testingclock.NewFakeClock(t0), reg: prometheus.NewRegistry(), pods: pods}
	opts.Recorder, opts.NodeRef, opts.Registerer, opts.Clock = e.rec, testNode, e.reg, e.clock
	opts.Logger = zaptest.NewLogger(t)
	m, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.m = m
	step := func(name string) func(context.Context) error {
		return func(context.Context) error {
			e.mu.Lock()
			e.steps = append(e.steps, name)
			f := e.onReclaim
			e.mu.Unlock()
			if f != nil {
				f(name)
			}
			return nil
		}
	}
	e.deps = Deps{
		Stats:                     e.stats,
		ActivePods:                func() []*v1.Pod { e.mu.Lock(); defer e.mu.Unlock(); return append([]*v1.Pod{}, e.pods...) },
		KillPod:                   e.killer.kill,
		PodCleanedUp:              func(*v1.Pod) bool { return true },
		DeleteAllUnusedContainers: step("containers"),
		DeleteUnusedImages:        step("images"),
	}
	return e
}

// sample sets the node's next sample, taken now.
func (e *env) sample(node *statsapi.NodeStats, pods ...statsapi.PodStats) { e.stats.set(node, pods...) }

// memSample is a sample with avail of 8Gi memory available, taken now.
func (e *env) memSample(avail int64, pods ...statsapi.PodStats) {
	e.sample(memNode(e.clock.Now(), avail, 8*gi-avail), pods...)
}

func (e *env) sync() []string { return names(e.m.synchronize(context.Background(), e.deps)) }

func (e *env) setPods(pods ...*v1.Pod) { e.mu.Lock(); defer e.mu.Unlock(); e.pods = pods }

func (e *env) reclaimSteps() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string{}, e.steps...)
}

// evictions reads kubelet_evictions{eviction_signal=signal} from the registry.
func (e *env) evictions(t *testing.T, signal string) float64 {
	t.Helper()
	families, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "kubelet_evictions" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "eviction_signal" && l.GetValue() == signal {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func mustParse(t *testing.T, cfg ThresholdConfig) []Threshold {
	t.Helper()
	ts, err := ParseThresholdConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func hardMemory(t *testing.T, value string, minReclaim ...string) []Threshold {
	cfg := ThresholdConfig{Hard: map[string]string{"memory.available": value}}
	if len(minReclaim) > 0 {
		cfg.MinimumReclaim = map[string]string{"memory.available": minReclaim[0]}
	}
	return mustParse(t, cfg)
}

func TestManagerMemoryHardEviction(t *testing.T) {
	t.Parallel()
	small := newPod("guaranteed-small", requests("memory", "1Gi"))
	big := newPod("best-effort-big")
	burst := newPod("burstable", requests("memory", "100Mi"))
	e := newEnv(t, Options{Thresholds: hardMemory(t, "1Gi")}, false, small, big, burst)
	e.memSample(500*mi, podMem(small, 500*mi), podMem(big, 800*mi), podMem(burst, 300*mi))

	if got := e.sync(); !slices.Equal(got, []string{"best-effort-big"}) {
		t.Fatalf("evicted %q, want [best-effort-big]", got)
	}
	if !e.m.IsUnderMemoryPressure() || e.m.IsUnderDiskPressure() || e.m.IsUnderPIDPressure() {
		t.Error("want MemoryPressure only")
	}
	wantMsg := "The node was low on resource: memory. Threshold quantity: 1Gi, available: 500Mi. " +
		"Container app was using 800Mi, request is 0, has larger consumption of memory. "
	if len(e.killer.calls) != 1 {
		t.Fatalf("KillPod calls = %d, want 1", len(e.killer.calls))
	}
	call := e.killer.calls[0]
	if call.grace != 1 || call.status.Phase != v1.PodFailed || call.status.Reason != "Evicted" || call.status.Message != wantMsg {
		t.Errorf("KillPod(grace %d) status = %s/%s/%q; want grace 1, Failed/Evicted/%q",
			call.grace, call.status.Phase, call.status.Reason, call.status.Message, wantMsg)
	}
	if len(call.status.Conditions) != 1 {
		t.Fatalf("conditions = %+v, want one DisruptionTarget", call.status.Conditions)
	}
	c := call.status.Conditions[0]
	if c.Type != v1.DisruptionTarget || c.Status != v1.ConditionTrue || c.Reason != "TerminationByKubelet" ||
		c.Message != wantMsg || c.ObservedGeneration != 3 || !c.LastTransitionTime.Time.Equal(t0) {
		t.Errorf("condition = %+v", c)
	}
	wantEvent := podEvent{pod: "best-effort-big", eventType: "Warning", reason: "Evicted", message: wantMsg,
		annotations: map[string]string{"offending_containers": "app", "offending_containers_usage": "800Mi", "starved_resource": "memory"}}
	if len(e.rec.pods()) != 1 || !equalEvent(e.rec.pods()[0], wantEvent) {
		t.Errorf("pod events = %+v, want %+v", e.rec.pods(), wantEvent)
	}
	if want := []string{"Warning EvictionThresholdMet Attempting to reclaim memory"}; !slices.Equal(e.rec.node(), want) {
		t.Errorf("node events = %q, want %q", e.rec.node(), want)
	}
	if err := testutil.GatherAndCompare(e.reg, strings.NewReader(`
# HELP kubelet_evictions [ALPHA] Cumulative number of pod evictions by eviction signal
# TYPE kubelet_evictions counter
kubelet_evictions{eviction_signal="memory.available"} 1
`), "kubelet_evictions"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(e.reg, "kubelet_eviction_stats_age_seconds"); err != nil || n != 1 {
		t.Errorf("stats age series = %d, %v; want 1", n, err)
	}
	if _, _, ok := e.m.Admit(newPod("new-best-effort")); ok {
		t.Error("a best effort pod was admitted under memory pressure")
	}

	// The next pass, on a new sample, evicts the next pod, one only.
	e.clock.Step(10 * time.Second)
	e.setPods(small, burst)
	e.memSample(600*mi, podMem(small, 500*mi), podMem(burst, 300*mi))
	if got := e.sync(); !slices.Equal(got, []string{"burstable"}) {
		t.Errorf("second pass evicted %q, want [burstable]", got)
	}
	if got := e.evictions(t, "memory.available"); got != 2 {
		t.Errorf("kubelet_evictions = %v, want 2", got)
	}
}

func equalEvent(a, b podEvent) bool {
	return a.pod == b.pod && a.eventType == b.eventType && a.reason == b.reason && a.message == b.message &&
		len(a.annotations) == len(b.annotations) && func() bool {
		for k, v := range b.annotations {
			if a.annotations[k] != v {
				return false
			}
		}
		return true
	}()
}

func TestManagerAllocatableMemory(t *testing.T) {
	t.Parallel()
	p := newPod("p")
	th := mustParse(t, ThresholdConfig{Hard: map[string]string{"memory.available": "100Mi"}, EnforceNodeAllocatable: []string{"pods"}})
	e := newEnv(t, Options{Thresholds: th}, false, p)
	node := memNode(t0, 4*gi, 4*gi)
	node.SystemContainers = []statsapi.ContainerStats{{Name: "pods", Memory: &statsapi.MemoryStats{Time: node.Memory.Time,
		AvailableBytes: u64(50 * mi), WorkingSetBytes: u64(3 * gi)}}}
	e.sample(node, podMem(p, gi))
	if got := e.sync(); !slices.Equal(got, []string{"p"}) {
		t.Fatalf("evicted %q, want [p]", got)
	}
	if got := e.evictions(t, "allocatableMemory.available"); got != 1 {
		t.Errorf("kubelet_evictions{allocatableMemory.available} = %v, want 1", got)
	}
}

func TestManagerCriticalPods(t *testing.T) {
	t.Parallel()
	static := newPod("static", annotated("kubernetes.io/config.source", "file"))
	mirror := newPod("mirror", annotated("kubernetes.io/config.mirror", "x"))
	critical := newPod("critical", priorityOf(2000000000))
	normal := newPod("normal", requests("memory", "1Gi"))
	for _, tc := range []struct {
		desc string
		pods []*v1.Pod
		want []string
	}{
		{desc: "critical pods are skipped for the next one", pods: []*v1.Pod{static, mirror, critical, normal}, want: []string{"normal"}},
		{desc: "all critical: nothing evicted", pods: []*v1.Pod{static, mirror, critical}, want: []string{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{Thresholds: hardMemory(t, "1Gi")}, false, tc.pods...)
			// The critical pods use the most and rank first.
			e.memSample(100*mi, podMem(static, 3*gi), podMem(mirror, 2*gi), podMem(critical, gi), podMem(normal, 100*mi))
			if got := e.sync(); !slices.Equal(got, tc.want) {
				t.Errorf("evicted %q, want %q", got, tc.want)
			}
			if got := e.killer.killed(); !slices.Equal(got, tc.want) {
				t.Errorf("killed %q, want %q", got, tc.want)
			}
			if got, want := e.evictions(t, "memory.available"), float64(len(tc.want)); got != want {
				t.Errorf("kubelet_evictions = %v, want %v", got, want)
			}
			if len(e.rec.pods()) != len(tc.want) {
				t.Errorf("pod events = %+v", e.rec.pods())
			}
		})
	}
}

func TestManagerSoftThreshold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		podGrace  *int64
		wantGrace int64
	}{
		{desc: "pod's shorter grace period", podGrace: i64(10), wantGrace: 10},
		{desc: "bounded by the maximum", podGrace: i64(120), wantGrace: 30},
		{desc: "no grace period: the maximum", wantGrace: 30},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			p := newPod("p")
			p.Spec.TerminationGracePeriodSeconds = tc.podGrace
			th := mustParse(t, ThresholdConfig{Soft: map[string]string{"memory.available": "2Gi"},
				SoftGracePeriod: map[string]string{"memory.available": "1m"}})
			e := newEnv(t, Options{Thresholds: th, MaxPodGracePeriodSeconds: 30}, false, p)
			for i, wantEvicted := range []bool{false, false, false, true} {
				e.memSample(gi, podMem(p, gi))
				got := e.sync()
				if !e.m.IsUnderMemoryPressure() {
					t.Errorf("pass %d: no MemoryPressure", i)
				}
				if (len(got) == 1) != wantEvicted {
					t.Fatalf("pass %d at %v: evicted %q, want evicted=%v", i, e.clock.Since(t0), got, wantEvicted)
				}
				e.clock.Step(20 * time.Second)
			}
			if g := e.killer.calls[0].grace; g != tc.wantGrace {
				t.Errorf("grace = %d, want %d", g, tc.wantGrace)
			}
		})
	}
}

func TestManagerStaleStats(t *testing.T) {
	t.Parallel()
	p := newPod("p")
	e := newEnv(t, Options{Thresholds: hardMemory(t, "1Gi")}, false, p)
	e.memSample(500*mi, podMem(p, gi))
	if got := e.sync(); len(got) != 1 {
		t.Fatalf("first pass evicted %q", got)
	}
	e.clock.Step(10 * time.Second) // the sample is not renewed
	if got := e.sync(); len(got) != 0 {
		t.Errorf("a stale sample evicted %q", got)
	}
	if !e.m.IsUnderMemoryPressure() {
		t.Error("MemoryPressure dropped on a stale sample")
	}
	e.memSample(500*mi, podMem(p, gi))
	if got := e.sync(); len(got) != 1 {
		t.Errorf("a new sample evicted %q, want one pod", got)
	}
}

func TestManagerPressureTransitionPeriod(t *testing.T) {
	t.Parallel()
	p := newPod("p")
	e := newEnv(t, Options{Thresholds: hardMemory(t, "1Gi")}, false, p) // default period: 5m
	e.memSample(500*mi, podMem(p, gi))
	e.sync()
	start := e.clock.Now()
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{10 * time.Second, true}, {5*time.Minute - time.Second, true}, {5 * time.Minute, false}, {6 * time.Minute, false}} {
		e.clock.SetTime(start.Add(tc.at))
		e.memSample(4*gi, podMem(p, gi))
		if got := e.sync(); len(got) != 0 {
			t.Errorf("at %v without pressure: evicted %q", tc.at, got)
		}
		if got := e.m.IsUnderMemoryPressure(); got != tc.want {
			t.Errorf("at %v: MemoryPressure = %v, want %v", tc.at, got, tc.want)
		}
		if _, _, ok := e.m.Admit(newPod("be")); ok == tc.want {
			t.Errorf("at %v: Admit(best effort) = %v", tc.at, ok)
		}
	}
}

func TestManagerPressureTransitionPeriodOption(t *testing.T) {
	t.Parallel()
	p := newPod("p")
	e := newEnv(t, Options{Thresholds: hardMemory(t, "1Gi"), PressureTransitionPeriod: 30 * time.Second}, false, p)
	e.memSample(500*mi, podMem(p, gi))
	e.sync()
	e.clock.Step(30 * time.Second)
	e.memSample(4*gi, podMem(p, gi))
	e.sync()
	if e.m.IsUnderMemoryPressure() {
		t.Error("MemoryPressure kept past a 30s transition period")
	}
}

func TestManagerMinReclaim(t *testing.T) {
	t.Parallel()
	p := newPod("p")
	e := newEnv(t, Options{Thresholds: hardMemory(t, "1Gi", "500Mi")}, false, p)
	for i, tc := range []struct {
		avail   int64
		evicted bool
	}{
		{avail: 900 * mi, evicted: true},        // met
		{avail: gi + 200*mi, evicted: true},     // above the threshold, below threshold + min reclaim
		{avail: gi + 500*mi - 1, evicted: true}, // one byte short
		{avail: gi + 500*mi, evicted: false},    // reclaimed
		{avail: gi + 200*mi, evicted: false},    // not met again without min reclaim
		{avail: gi - 1, evicted: true},          // met again
	} {
		e.clock.Step(10 * time.Second)
		e.memSample(tc.avail, podMem(p, gi))
		if got := e.sync(); (len(got) == 1) != tc.evicted {
			t.Errorf("pass %d (available %d): evicted %q, want evicted=%v", i, tc.avail, got, tc.evicted)
		}
	}
}

func TestManagerPIDPressure(t *testing.T) {
	t.Parallel()
	few, many := newPod("few"), newPod("many")
	th := mustParse(t, ThresholdConfig{Hard: map[string]string{"pid.available": "1200"}})
	e := newEnv(t, Options{Thresholds: th}, false, few, many)
	node := memNode(t0, 4*gi, 4*gi)
	node.Rlimit = &statsapi.RlimitStats{Time: node.Memory.Time, MaxPID: i64(4000), NumOfRunningProcesses: i64(3500)}
	procs := func(p *v1.Pod, n int64) statsapi.PodStats {
		return statsapi.PodStats{PodRef: statsapi.PodReference{UID: string(p.UID)}, ProcessStats: &statsapi.ProcessStats{ProcessCount: u64(n)}}
	}
	e.sample(node, procs(few, 10), procs(many, 3000))
	if got := e.sync(); !slices.Equal(got, []string{"many"}) {
		t.Fatalf("evicted %q, want [many]", got)
	}
	if !e.m.IsUnderPIDPressure() || len(e.reclaimSteps()) != 0 {
		t.Errorf("PIDPressure = %v, reclaim steps %q", e.m.IsUnderPIDPressure(), e.reclaimSteps())
	}
	if want := "The node was low on resource: pids. Threshold quantity: 1200, available: 500. "; e.killer.calls[0].status.Message != want {
		t.Errorf("message = %q, want %q", e.killer.calls[0].status.Message, want)
	}
}
