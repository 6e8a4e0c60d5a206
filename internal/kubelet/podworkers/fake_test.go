package podworkers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/waitfor"
)

// TestMain fails the package if any goroutine (a pod worker) outlives the tests;
// every test stops its PodWorkers.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// call is one SyncFuncs call.
type call struct {
	kind       string // "sync", "terminating", "terminated"
	uid        k8stypes.UID
	updateType UpdateType
	version    string // the pod's ResourceVersion
	grace      int64  // terminating: the grace period passed (-1: nil)
}

func (c call) String() string {
	return fmt.Sprintf("%s(%s,%s,v%s,g%d)", c.kind, c.uid, c.updateType, c.version, c.grace)
}

// fakeSync records calls; the hooks (set before use) decide the results.
type fakeSync struct {
	calls       chan call
	mu          sync.Mutex
	syncPod     func(ctx context.Context, pod *v1.Pod) (bool, error)
	terminating func(ctx context.Context, pod *v1.Pod, grace int64) error
	terminated  func(ctx context.Context, pod *v1.Pod) error
}

func (f *fakeSync) hooks() (func(context.Context, *v1.Pod) (bool, error), func(context.Context, *v1.Pod, int64) error, func(context.Context, *v1.Pod) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncPod, f.terminating, f.terminated
}

func (f *fakeSync) SyncPod(ctx context.Context, ut UpdateType, pod *v1.Pod, _ *kubecontainer.PodStatus) (bool, error) {
	f.calls <- call{kind: "sync", uid: pod.UID, updateType: ut, version: pod.ResourceVersion, grace: -1}
	if h, _, _ := f.hooks(); h != nil {
		return h(ctx, pod)
	}
	return false, nil
}

func (f *fakeSync) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, _ *kubecontainer.PodStatus, gp *int64) error {
	g := int64(-1)
	if gp != nil {
		g = *gp
	}
	f.calls <- call{kind: "terminating", uid: pod.UID, version: pod.ResourceVersion, grace: g}
	if _, h, _ := f.hooks(); h != nil {
		return h(ctx, pod, g)
	}
	return nil
}

func (f *fakeSync) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, _ *kubecontainer.PodStatus) error {
	f.calls <- call{kind: "terminated", uid: pod.UID, version: pod.ResourceVersion, grace: -1}
	if _, _, h := f.hooks(); h != nil {
		return h(ctx, pod)
	}
	return nil
}

// fakeCache answers GetNewerThan at once (or blocks while block is set) and
// records the minimum times asked for.
type fakeCache struct {
	mu       sync.Mutex
	minTimes map[k8stypes.UID][]time.Time
	block    map[k8stypes.UID]chan struct{}
}

func (c *fakeCache) GetNewerThan(ctx context.Context, uid k8stypes.UID, minTime time.Time) (*kubecontainer.PodStatus, error) {
	c.mu.Lock()
	c.minTimes[uid] = append(c.minTimes[uid], minTime)
	gate := c.block[uid]
	c.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &kubecontainer.PodStatus{ID: uid}, nil
}

func (c *fakeCache) asked(uid k8stypes.UID) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.minTimes[uid]...)
}

type harness struct {
	w     *PodWorkers
	sync  *fakeSync
	cache *fakeCache
	clk   *clocktesting.FakeClock
	reg   *prometheus.Registry
}

const (
	testResync  = 10 * time.Second
	testBackOff = 3 * time.Second
)

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{
		sync:  &fakeSync{calls: make(chan call, 100)},
		cache: &fakeCache{minTimes: map[k8stypes.UID][]time.Time{}, block: map[k8stypes.UID]chan struct{}{}},
		clk:   clocktesting.NewFakeClock(t0),
		reg:   prometheus.NewPedanticRegistry(),
	}
	var err error
	h.w, err = New(Options{Sync: h.sync, Cache: h.cache, ResyncInterval: testResync, BackOffPeriod: testBackOff,
		Logger: zaptest.NewLogger(t), Clock: h.clk, Registerer: h.reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.w.Stop)
	return h
}

// next returns the next SyncFuncs call (failing after 5s).
func (h *harness) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-h.sync.calls:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no sync call within 5s")
	}
	return call{}
}

// expect checks the next calls, in order, by kind, uid and (if set) grace and version.
func (h *harness) expect(t *testing.T, want ...call) {
	t.Helper()
	for _, w := range want {
		c := h.next(t)
		if c.kind != w.kind || c.uid != w.uid || (w.grace != 0 && c.grace != w.grace) || (w.version != "" && c.version != w.version) {
			t.Fatalf("call %v, want %v", c, w)
		}
	}
}

// quiet checks that no call comes for a while.
func (h *harness) quiet(t *testing.T) {
	t.Helper()
	select {
	case c := <-h.sync.calls:
		t.Fatalf("unexpected call %v", c)
	case <-time.After(50 * time.Millisecond):
	}
}

// idle waits until the pod's worker has nothing pending and is not syncing.
func (h *harness) idle(t *testing.T, uid k8stypes.UID) {
	t.Helper()
	waitFor(t, func() bool {
		h.w.mu.Lock()
		defer h.w.mu.Unlock()
		st, ok := h.w.pods[uid]
		return !ok || !st.working
	})
}

// step advances the fake clock once the worker armed its resync timer.
func (h *harness) step(t *testing.T, d time.Duration) {
	t.Helper()
	waitFor(t, h.clk.HasWaiters)
	h.clk.Step(d)
}

var waitFor = waitfor.Condition

func ptr[T any](v T) *T { return &v }

// newPod builds a pod with a 30s grace period; mods adjust it.
func newPod(uid, version string, mods ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: k8stypes.UID(uid), Name: "p-" + uid, Namespace: "ns", ResourceVersion: version},
		Spec:       v1.PodSpec{TerminationGracePeriodSeconds: ptr(int64(30))},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func static(p *v1.Pod) {
	p.Annotations = map[string]string{kubecontainer.ConfigSourceAnnotationKey: kubecontainer.FileSource}
	p.Name = "static"
}

// blockUntilCancelled is a sync hook that runs until its context ends.
func blockUntilCancelled(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}
