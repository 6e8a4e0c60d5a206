package images

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNewValidation(t *testing.T) {
	t.Parallel()
	valid := Options{Images: &fakeImages{}, Containers: &fakeContainers{}, Fs: &fakeFs{},
		Policy: Policy{HighThresholdPercent: 85, LowThresholdPercent: 80}}
	for _, tc := range []struct {
		desc    string
		edit    func(*Options)
		wantErr string
	}{
		{"valid", func(*Options) {}, ""},
		{"all zero thresholds", func(o *Options) { o.Policy = Policy{} }, ""},
		{"high above 100", func(o *Options) { o.Policy.HighThresholdPercent = 101 },
			"invalid HighThresholdPercent 101, must be in range [0-100]"},
		{"high negative", func(o *Options) { o.Policy.HighThresholdPercent = -1 },
			"invalid HighThresholdPercent -1, must be in range [0-100]"},
		{"low above 100", func(o *Options) { o.Policy.LowThresholdPercent = 101 },
			"invalid LowThresholdPercent 101, must be in range [0-100]"},
		{"low negative", func(o *Options) { o.Policy.LowThresholdPercent = -5 },
			"invalid LowThresholdPercent -5, must be in range [0-100]"},
		{"low above high", func(o *Options) { o.Policy.LowThresholdPercent = 90 },
			"LowThresholdPercent 90 can not be higher than HighThresholdPercent 85"},
		{"no images", func(o *Options) { o.Images = nil }, "images: Options.Images is required"},
		{"no containers", func(o *Options) { o.Containers = nil }, "images: Options.Containers is required"},
		{"no fs", func(o *Options) { o.Fs = nil }, "images: Options.Fs is required"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			opts := valid
			tc.edit(&opts)
			m, err := New(opts)
			if tc.wantErr == "" {
				if err != nil || m == nil {
					t.Fatalf("New = %v, %v; want a Manager", m, err)
				}
				return
			}
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("New error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestMetricRegistration(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	opts := Options{Images: &fakeImages{}, Containers: &fakeContainers{}, Fs: &fakeFs{}, Registerer: reg}
	m1, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := New(opts)
	if err != nil {
		t.Fatalf("second New on the same registry: %v", err)
	}
	m1.collected.WithLabelValues(reasonAge).Inc()
	m2.collected.WithLabelValues(reasonSpace).Add(2)
	want := `
# HELP kubelet_image_garbage_collected_total [ALPHA] Total number of images garbage collected by the kubelet, whether through disk usage or image age.
# TYPE kubelet_image_garbage_collected_total counter
kubelet_image_garbage_collected_total{reason="age"} 1
kubelet_image_garbage_collected_total{reason="space"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_image_garbage_collected_total"); err != nil {
		t.Error(err)
	}
	if _, err := New(Options{Images: &fakeImages{}, Containers: &fakeContainers{}, Fs: &fakeFs{}}); err != nil {
		t.Errorf("New without a Registerer: %v", err)
	}
}

func TestDetectImages(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Policy{HighThresholdPercent: 90, LowThresholdPercent: 80})
	ctx := context.Background()
	first := e.clock.Now()
	e.images.images = []*runtimeapi.Image{image("a", 1), image("b", 2)}
	if _, err := e.m.detectImages(ctx, first); err != nil {
		t.Fatal(err)
	}

	e.clock.Step(time.Minute)
	second := e.clock.Now()
	pinnedC := image("c", 3)
	pinnedC.Pinned = true
	e.images.images = []*runtimeapi.Image{image("a", 10), pinnedC}
	e.containers.containers = []*runtimeapi.Container{{Id: "x", ImageRef: "a", State: runtimeapi.ContainerState_CONTAINER_EXITED}}
	inUse, err := e.m.detectImages(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := inUse["a"]; !ok {
		t.Errorf("in use = %v, want a", inUse)
	}
	if _, ok := e.m.records["b"]; ok {
		t.Error("record of vanished image b kept")
	}
	a, c := e.m.records["a"], e.m.records["c"]
	if a == nil || c == nil {
		t.Fatalf("records = %v", e.m.records)
	}
	if !a.firstDetected.Equal(first) || !a.lastUsed.Equal(second) || a.size != 10 {
		t.Errorf("a = %+v; want firstDetected %v, lastUsed %v, size 10", *a, first, second)
	}
	if !c.firstDetected.Equal(second) || !c.lastUsed.IsZero() || !c.pinned {
		t.Errorf("c = %+v; want firstDetected %v, never used, pinned", *c, second)
	}
}

func TestImagesInUse(t *testing.T) {
	t.Parallel()
	got := imagesInUse([]*runtimeapi.Container{
		{Id: "1", ImageRef: "sha256:aaa", Image: &runtimeapi.ImageSpec{Image: "nginx:1"}},
		{Id: "2", ImageId: "sha256:bbb", ImageRef: "repo@sha256:ccc"},
		{Id: "3"},
	})
	want := []string{"nginx:1", "repo@sha256:ccc", "sha256:aaa", "sha256:bbb"}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, want) {
		t.Errorf("imagesInUse = %v, want %v", keys, want)
	}
}

func TestPeriodicGCEvents(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Policy{HighThresholdPercent: 90, LowThresholdPercent: 80})
	ctx := context.Background()
	failing := []bool{true, true, true, false, true, false, true, true}
	prev := false
	for _, fail := range failing {
		if fail {
			e.fs.setErr(errors.New("stats not ready"))
		} else {
			e.fs.setErr(nil)
		}
		prev = e.m.periodicGC(ctx, epoch, prev)
		if prev != fail {
			t.Fatalf("periodicGC reported failed=%v, want %v", prev, fail)
		}
	}
	// Events for the 2nd and 3rd of the first run of failures and the 2nd of
	// the last one; none for the isolated failure.
	ev := event{"Warning", "ImageGCFailed", "stats not ready"}
	if got, want := e.events.list(t), []event{ev, ev, ev}; !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

// waitFor polls cond until it holds or a deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestStart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		policy  Policy
		loops   int // timers Start waits on
		wantGCs bool
	}{
		{"with image GC", Policy{HighThresholdPercent: 85, LowThresholdPercent: 80}, 3, true},
		{"GC disabled at 100% without MaxAge", Policy{HighThresholdPercent: 100, LowThresholdPercent: 80}, 2, false},
		{"100% with MaxAge still collects", Policy{HighThresholdPercent: 100, LowThresholdPercent: 80, MaxAge: time.Hour}, 3, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, tc.policy)
			e.images.images = []*runtimeapi.Image{image("small", 1), image("big", 2)}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { e.m.Start(ctx); close(done) }()

			waitFor(t, "the loops to run once", func() bool { return e.clock.Waiters() == tc.loops })
			if got := len(e.m.NodeImages(-1)); got != 2 {
				t.Errorf("NodeImages after the first refresh has %d images, want 2", got)
			}
			if got := e.fs.statsCalls() > 0; got != tc.wantGCs {
				t.Errorf("GC ran = %v, want %v", got, tc.wantGCs)
			}
			lists := e.images.listCalls()
			e.images.mu.Lock()
			e.images.images = append(e.images.images, image("new", 3))
			e.images.mu.Unlock()
			e.clock.Step(cachePeriod)
			waitFor(t, "the cache refresh", func() bool {
				return e.images.listCalls() > lists && e.clock.Waiters() == tc.loops
			})
			if got := len(e.m.NodeImages(-1)); got != 3 {
				t.Errorf("NodeImages after 30s has %d images, want 3", got)
			}

			cancel()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Start did not return after cancel")
			}
		})
	}
}

func TestConcurrentCollections(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Policy{HighThresholdPercent: 50, LowThresholdPercent: 0})
	e.fs.available = 0
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		e.seedImages(seed{img: image(id, 10), firstDetectedAgo: time.Hour})
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if i%2 == 0 {
				_ = e.m.GarbageCollect(ctx, epoch)
			} else {
				_ = e.m.DeleteUnusedImages(ctx)
			}
			_ = e.m.NodeImages(-1)
		})
	}
	wg.Wait()
	removed := e.images.removedIDs()
	slices.Sort(removed)
	if want := []string{"a", "b", "c", "d", "e", "f"}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want each image once: %v", removed, want)
	}
}
