package images

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

// fakeImages is an in-memory ImageService.
type fakeImages struct {
	mu        sync.Mutex
	images    []*runtimeapi.Image
	listErr   error
	removeErr map[string]error // by image ID
	removed   []string         // in removal order
	lists     int              // ListImages calls
}

func (f *fakeImages) ListImages(context.Context, *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	if f.listErr != nil {
		return nil, f.listErr
	}
	return slices.Clone(f.images), nil
}

func (f *fakeImages) RemoveImage(_ context.Context, spec *runtimeapi.ImageSpec) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.removeErr[spec.Image]; err != nil {
		return err
	}
	f.images = slices.DeleteFunc(f.images, func(img *runtimeapi.Image) bool { return img.Id == spec.Image })
	f.removed = append(f.removed, spec.Image)
	return nil
}

func (f *fakeImages) removedIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.removed)
}

func (f *fakeImages) listCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lists
}

// fakeContainers is an in-memory ContainerLister.
type fakeContainers struct {
	mu         sync.Mutex
	containers []*runtimeapi.Container
	err        error
}

func (f *fakeContainers) ListContainers(_ context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if filter != nil {
		panic("the Manager must list all containers")
	}
	return slices.Clone(f.containers), f.err
}

// fakeFs is an FsStats with fixed numbers.
type fakeFs struct {
	mu        sync.Mutex
	capacity  uint64
	available uint64
	err       error
	calls     int
}

func (f *fakeFs) ImageFsStats(context.Context) (*statsapi.FsStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	c, a := f.capacity, f.available
	return &statsapi.FsStats{CapacityBytes: &c, AvailableBytes: &a}, nil
}

func (f *fakeFs) setErr(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

func (f *fakeFs) statsCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// event is one recorded node event.
type event struct{ typ, reason, message string }

// fakeEvents records events, all about the node.
type fakeEvents struct{ eventtest.Recorder }

var testNode = &v1.ObjectReference{Kind: "Node", Name: "n"}

func (f *fakeEvents) list(t *testing.T) []event {
	t.Helper()
	var out []event
	for _, e := range f.About(t, testNode) {
		out = append(out, event{e.Type, e.Reason, e.Message})
	}
	return out
}

// testEnv is a Manager wired to fakes.
type testEnv struct {
	m          *Manager
	images     *fakeImages
	containers *fakeContainers
	fs         *fakeFs
	events     *fakeEvents
	clock      *testingclock.FakeClock
	registry   *prometheus.Registry
}

// epoch is the fake clock's start.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newTestEnv(t *testing.T, policy Policy) *testEnv {
	t.Helper()
	e := &testEnv{
		images:     &fakeImages{},
		containers: &fakeContainers{},
		fs:         &fakeFs{capacity: 1000, available: 1000},
		events:     &fakeEvents{},
		clock:      testingclock.NewFakeClock(epoch),
		registry:   prometheus.NewRegistry(),
	}
	m, err := New(Options{
		Images: e.images, Containers: e.containers, Fs: e.fs, Policy: policy,
		Recorder: e.events, NodeRef: testNode, Registerer: e.registry, Logger: zaptest.NewLogger(t), Clock: e.clock,
	})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.m = m
	return e
}

// image builds a CRI image.
func image(id string, size uint64) *runtimeapi.Image {
	return &runtimeapi.Image{Id: id, Size: size}
}

// seed is the history of one image: when it was first detected and last used,
// as durations before now (lastUsedAgo 0 = never used).
type seed struct {
	img              *runtimeapi.Image
	firstDetectedAgo time.Duration
	lastUsedAgo      time.Duration
}

// seedImages puts the images in the fake runtime and their records in the
// Manager, as if earlier detections had seen them.
func (e *testEnv) seedImages(seeds ...seed) {
	now := e.clock.Now()
	for _, s := range seeds {
		e.images.images = append(e.images.images, s.img)
		r := &imageRecord{firstDetected: now.Add(-s.firstDetectedAgo), size: int64(s.img.Size)}
		if s.lastUsedAgo > 0 {
			r.lastUsed = now.Add(-s.lastUsedAgo)
		}
		e.m.records[s.img.Id] = r
	}
}
