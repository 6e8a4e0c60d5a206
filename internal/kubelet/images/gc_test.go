package images

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/prometheus/client_golang/prometheus/testutil"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Containers and images shared by spaceCases.
var (
	running   = &runtimeapi.Container{Id: "c1", ImageRef: "img-running", State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	exited    = &runtimeapi.Container{Id: "c2", Image: &runtimeapi.ImageSpec{Image: "img-exited"}, State: runtimeapi.ContainerState_CONTAINER_EXITED}
	byID      = &runtimeapi.Container{Id: "c3", ImageId: "img-by-id", ImageRef: "repo@sha256:x", State: runtimeapi.ContainerState_CONTAINER_EXITED}
	pinnedImg = &runtimeapi.Image{Id: "img-pinned", Size: 500, Pinned: true}
)

// old is a first detection long past MinAge.
const old = 10 * time.Hour

// spaceCase is one case of TestGarbageCollectSpace.
type spaceCase struct {
	desc        string
	policy      Policy
	capacity    uint64
	available   uint64
	seeds       []seed
	containers  []*runtimeapi.Container
	wantRemoved []string
	wantErr     string
	wantEvents  []event
}

var spaceCases = []spaceCase{{
	desc:     "below the high threshold nothing is removed",
	policy:   Policy{HighThresholdPercent: 90, LowThresholdPercent: 80},
	capacity: 1000, available: 200, // 80% used
	seeds: []seed{{img: image("a", 100), firstDetectedAgo: old}},
}, {
	desc:     "at the high threshold frees down to the low one and stops when enough",
	policy:   Policy{HighThresholdPercent: 90, LowThresholdPercent: 80},
	capacity: 1000, available: 100, // 90% used; to free: 200-100 = 100
	seeds: []seed{
		{img: image("a", 60), firstDetectedAgo: old, lastUsedAgo: 3 * time.Hour},
		{img: image("b", 60), firstDetectedAgo: old, lastUsedAgo: 2 * time.Hour},
		{img: image("c", 60), firstDetectedAgo: old, lastUsedAgo: time.Hour},
	},
	wantRemoved: []string{"a", "b"},
}, {
	desc:     "least recently used first, never used before used, ties by first detection",
	policy:   Policy{HighThresholdPercent: 50, LowThresholdPercent: 0},
	capacity: 1000, available: 0,
	seeds: []seed{
		{img: image("used-recently", 1), firstDetectedAgo: old, lastUsedAgo: time.Minute},
		{img: image("used-long-ago", 1), firstDetectedAgo: old, lastUsedAgo: 5 * time.Hour},
		{img: image("never-used-newer", 1), firstDetectedAgo: time.Hour},
		{img: image("never-used-older", 1), firstDetectedAgo: 2 * time.Hour},
	},
	wantRemoved: []string{"never-used-older", "never-used-newer", "used-long-ago", "used-recently"},
	wantErr:     "Insufficient free disk space",
	wantEvents: []event{{"Warning", "FreeDiskSpaceFailed", "Insufficient free disk space on the node's image filesystem " +
		"(100% of 1000 B used). Failed to free sufficient space by deleting unused images (freed 4 bytes). " +
		"Investigate disk usage, as it could be used by active images, logs, volumes, or other data."}},
}, {
	desc:     "images of running and exited containers are never removed",
	policy:   Policy{HighThresholdPercent: 50, LowThresholdPercent: 50},
	capacity: 1000, available: 0, // to free 500
	seeds: []seed{
		{img: image("img-running", 400), firstDetectedAgo: old},
		{img: image("img-exited", 400), firstDetectedAgo: old},
		{img: image("img-by-id", 400), firstDetectedAgo: old},
		{img: image("free", 500), firstDetectedAgo: old, lastUsedAgo: time.Hour},
	},
	containers:  []*runtimeapi.Container{running, exited, byID},
	wantRemoved: []string{"free"},
}, {
	desc:     "pinned images are never removed",
	policy:   Policy{HighThresholdPercent: 50, LowThresholdPercent: 50},
	capacity: 1000, available: 0,
	seeds: []seed{
		{img: pinnedImg, firstDetectedAgo: old},
		{img: image("free", 500), firstDetectedAgo: old, lastUsedAgo: time.Hour},
	},
	wantRemoved: []string{"free"},
}, {
	desc:     "images younger than MinAge are skipped",
	policy:   Policy{HighThresholdPercent: 50, LowThresholdPercent: 50, MinAge: 2 * time.Minute},
	capacity: 1000, available: 0,
	seeds: []seed{
		{img: image("young", 500), firstDetectedAgo: time.Minute},
		{img: image("grown", 500), firstDetectedAgo: 2 * time.Minute},
	},
	wantRemoved: []string{"grown"},
}, {
	desc:     "available above capacity is clamped",
	policy:   Policy{HighThresholdPercent: 90, LowThresholdPercent: 80},
	capacity: 1000, available: 5000,
	seeds: []seed{{img: image("a", 100), firstDetectedAgo: old}},
}, {
	desc:     "zero capacity is an InvalidDiskCapacity event",
	policy:   Policy{HighThresholdPercent: 90, LowThresholdPercent: 80},
	capacity: 0, available: 0,
	seeds:      []seed{{img: image("a", 100), firstDetectedAgo: old}},
	wantErr:    "invalid capacity 0 on image filesystem",
	wantEvents: []event{{"Warning", "InvalidDiskCapacity", "invalid capacity 0 on image filesystem"}},
}, {
	desc:     "not enough to free is a FreeDiskSpaceFailed event",
	policy:   Policy{HighThresholdPercent: 85, LowThresholdPercent: 80},
	capacity: 3 << 30, available: 300 << 20, // 91% used
	seeds:       []seed{{img: image("a", 1<<20), firstDetectedAgo: old}},
	wantRemoved: []string{"a"},
	wantErr:     "Insufficient free disk space",
	wantEvents: []event{{"Warning", "FreeDiskSpaceFailed", "Insufficient free disk space on the node's image filesystem " +
		"(91% of 3.0 GiB used). Failed to free sufficient space by deleting unused images (freed 1048576 bytes). " +
		"Investigate disk usage, as it could be used by active images, logs, volumes, or other data."}},
}}

func TestGarbageCollectSpace(t *testing.T) {
	t.Parallel()
	for _, tc := range spaceCases {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, tc.policy)
			e.fs.capacity, e.fs.available = tc.capacity, tc.available
			e.containers.containers = tc.containers
			e.seedImages(tc.seeds...)

			err := e.m.GarbageCollect(context.Background(), epoch)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("GarbageCollect: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("GarbageCollect error = %v, want %q", err, tc.wantErr)
			}
			if got := e.images.removedIDs(); !slices.Equal(got, tc.wantRemoved) {
				t.Errorf("removed %v, want %v", got, tc.wantRemoved)
			}
			if got := e.events.list(t); !slices.Equal(got, tc.wantEvents) {
				t.Errorf("events %q, want %q", got, tc.wantEvents)
			}
			if got := testutil.ToFloat64(e.m.collected.WithLabelValues(reasonSpace)); got != float64(len(tc.wantRemoved)) {
				t.Errorf("space metric = %v, want %d", got, len(tc.wantRemoved))
			}
			for _, id := range tc.wantRemoved {
				if _, ok := e.m.records[id]; ok {
					t.Errorf("record of removed image %q kept", id)
				}
			}
		})
	}
}

func TestGarbageCollectMaxAge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc        string
		maxAge      time.Duration
		uptime      time.Duration // now - beganGC
		available   uint64
		wantRemoved []string
		wantAge     float64
		wantSpace   float64
		// The post-GC hooks (the pull records' pruning) run after the space
		// step, with the images left (upstream's: not after the age step).
		wantHooks [][]string
	}{{
		desc: "disabled", maxAge: 0, uptime: 100 * time.Hour, available: 1000,
	}, {
		desc: "not before the kubelet ran for MaxAge", maxAge: 3 * time.Hour, uptime: 3 * time.Hour, available: 1000,
	}, {
		desc: "images unused for longer than MaxAge", maxAge: 3 * time.Hour, uptime: 4 * time.Hour, available: 1000,
		wantRemoved: []string{"never-used", "used-4h-ago"}, wantAge: 2,
	}, {
		desc: "then the space path over the rest", maxAge: 3 * time.Hour, uptime: 4 * time.Hour, available: 0,
		wantRemoved: []string{"never-used", "used-4h-ago", "used-1h-ago"}, wantAge: 2, wantSpace: 1,
		wantHooks: [][]string{{}},
	}} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, Policy{HighThresholdPercent: 90, LowThresholdPercent: 80, MaxAge: tc.maxAge})
			e.fs.available = tc.available
			e.seedImages(
				seed{img: image("never-used", 100), firstDetectedAgo: 5 * time.Hour},
				seed{img: image("used-4h-ago", 100), firstDetectedAgo: 5 * time.Hour, lastUsedAgo: 4 * time.Hour},
				seed{img: image("used-1h-ago", 500), firstDetectedAgo: 5 * time.Hour, lastUsedAgo: time.Hour},
			)
			var hooks [][]string
			e.m.hooks = []PostGCHook{func(_ context.Context, remaining []string, gcStart time.Time) {
				if !gcStart.Equal(e.clock.Now()) {
					t.Errorf("hook gcStart = %v, want the collection's start %v", gcStart, e.clock.Now())
				}
				slices.Sort(remaining)
				hooks = append(hooks, append([]string{}, remaining...))
			}}
			if err := e.m.GarbageCollect(context.Background(), e.clock.Now().Add(-tc.uptime)); err != nil {
				t.Fatalf("GarbageCollect: %v", err)
			}
			if !reflect.DeepEqual(hooks, tc.wantHooks) {
				t.Errorf("post-GC hooks got %q, want %q", hooks, tc.wantHooks)
			}
			if got := e.images.removedIDs(); !slices.Equal(got, tc.wantRemoved) {
				t.Errorf("removed %v, want %v", got, tc.wantRemoved)
			}
			if got := testutil.ToFloat64(e.m.collected.WithLabelValues(reasonAge)); got != tc.wantAge {
				t.Errorf("age metric = %v, want %v", got, tc.wantAge)
			}
			if got := testutil.ToFloat64(e.m.collected.WithLabelValues(reasonSpace)); got != tc.wantSpace {
				t.Errorf("space metric = %v, want %v", got, tc.wantSpace)
			}
		})
	}
}

func TestGarbageCollectErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	for _, tc := range []struct {
		desc    string
		policy  Policy
		setup   func(*testEnv)
		wantErr string
	}{{
		desc:    "listing images fails",
		policy:  Policy{HighThresholdPercent: 90, LowThresholdPercent: 80},
		setup:   func(e *testEnv) { e.images.listErr = boom },
		wantErr: "boom",
	}, {
		desc:    "listing containers fails",
		policy:  Policy{HighThresholdPercent: 90, LowThresholdPercent: 80},
		setup:   func(e *testEnv) { e.containers.err = boom },
		wantErr: "boom",
	}, {
		desc:    "fs stats fail",
		policy:  Policy{HighThresholdPercent: 90, LowThresholdPercent: 80},
		setup:   func(e *testEnv) { e.fs.err = boom },
		wantErr: "boom",
	}, {
		desc:   "removal fails on the space path",
		policy: Policy{HighThresholdPercent: 90, LowThresholdPercent: 80},
		setup: func(e *testEnv) {
			e.fs.available = 0
			e.images.removeErr = map[string]error{"a": errors.New("busy a"), "b": errors.New("busy b")}
		},
		wantErr: "wanted to free 200 bytes, but freed 100 bytes space with errors in image deletion: [busy a, busy b]",
	}, {
		desc:   "removal fails on the age path",
		policy: Policy{HighThresholdPercent: 90, LowThresholdPercent: 80, MaxAge: time.Hour},
		setup: func(e *testEnv) {
			e.images.removeErr = map[string]error{"a": errors.New("busy a")}
		},
		wantErr: "wanted to free images older than 1h0m0s, encountered errors in image deletion: busy a",
	}} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, tc.policy)
			e.seedImages(
				seed{img: image("a", 100), firstDetectedAgo: 5 * time.Hour},
				seed{img: image("b", 100), firstDetectedAgo: 4 * time.Hour},
				seed{img: image("c", 100), firstDetectedAgo: 3 * time.Hour},
			)
			tc.setup(e)
			err := e.m.GarbageCollect(context.Background(), epoch.Add(-10*time.Hour))
			if err == nil || err.Error() != tc.wantErr {
				t.Fatalf("GarbageCollect error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestDeleteUnusedImages(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Policy{HighThresholdPercent: 90, LowThresholdPercent: 80, MinAge: time.Minute})
	pinned := image("pinned", 1)
	pinned.Pinned = true
	e.seedImages(
		seed{img: image("a", 10), firstDetectedAgo: time.Hour, lastUsedAgo: 2 * time.Minute},
		seed{img: image("b", 10), firstDetectedAgo: time.Hour},
		seed{img: image("young", 10), firstDetectedAgo: time.Second},
		seed{img: image("used", 10), firstDetectedAgo: time.Hour},
		seed{img: pinned, firstDetectedAgo: time.Hour},
	)
	e.containers.containers = []*runtimeapi.Container{{Id: "c", ImageRef: "used"}}

	if err := e.m.DeleteUnusedImages(context.Background()); err != nil {
		t.Fatalf("DeleteUnusedImages: %v", err)
	}
	if got, want := e.images.removedIDs(), []string{"b", "a"}; !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	if got := testutil.ToFloat64(e.m.collected.WithLabelValues(reasonSpace)); got != 2 {
		t.Errorf("space metric = %v, want 2", got)
	}
	if got := e.fs.statsCalls(); got != 0 {
		t.Errorf("fs stats read %d times, want 0", got)
	}
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1<<20 - 1, "1024.0 KiB"},
		{5 << 20, "5.0 MiB"},
		{3 << 30, "3.0 GiB"},
		{2 << 40, "2.0 TiB"},
		{3 << 50, "3072.0 TiB"},
	} {
		if got := formatSize(tc.in); got != tc.want {
			t.Errorf("formatSize(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestGarbageCollectSpan: with a tracer, a collection is upstream's
// Images/GarbageCollect span.
func TestGarbageCollectSpan(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Policy{HighThresholdPercent: 90, LowThresholdPercent: 80})
	rec := tracetest.NewSpanRecorder()
	e.m.tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer(TracerName)
	if err := e.m.GarbageCollect(context.Background(), epoch); err != nil {
		t.Fatal(err)
	}
	if s := rec.Ended(); len(s) != 1 || s[0].Name() != "Images/GarbageCollect" || s[0].InstrumentationScope().Name != TracerName {
		t.Errorf("spans %v, want one Images/GarbageCollect of scope %s", s, TracerName)
	}
}
