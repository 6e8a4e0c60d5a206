package kuberuntime

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
)

// rcRotationRuntime is a hand-written runtime for log rotation: containers with a
// state and a log path; ReopenContainerLog creates the live file like a runtime
// does, unless reopenErr is set.
type rcRotationRuntime struct {
	mu        sync.Mutex
	states    map[string]runtimeapi.ContainerState
	paths     map[string]string
	reopenErr error
	reopens   int
	statuses  int
	// hold, when set, runs inside ContainerStatus outside the lock; inFlight
	// and maxInFlight count the concurrent calls.
	hold                  func()
	inFlight, maxInFlight int
}

func (r *rcRotationRuntime) ListContainers(_ context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*runtimeapi.Container
	for id, st := range r.states {
		if f.GetState() != nil && f.GetState().GetState() != st {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: id, State: st})
	}
	return out, nil
}

func (r *rcRotationRuntime) ContainerStatus(_ context.Context, id string, _ bool) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	hold := r.hold
	r.mu.Unlock()
	if hold != nil {
		hold()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inFlight--
	r.statuses++
	st, ok := r.states[id]
	if !ok {
		return nil, grpcstatus.Error(codes.NotFound, "no such container")
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: id, State: st, LogPath: r.paths[id]}}, nil
}

func (r *rcRotationRuntime) ReopenContainerLog(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reopens++
	if r.reopenErr != nil {
		return r.reopenErr
	}
	f, err := os.OpenFile(r.paths[id], os.O_CREATE|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	return f.Close()
}

func (r *rcRotationRuntime) counts() (statuses, reopens int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.statuses, r.reopens
}

// rcRotationEnv is a rotator over one running container whose live log is dir/c/0.log.
type rcRotationEnv struct {
	rt   *rcRotationRuntime
	r    *logRotator
	path string
	now  time.Time
	logs *observer.ObservedLogs
}

func newRCRotationEnv(t *testing.T, maxSize int64, maxFiles int, liveSize int) *rcRotationEnv {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ns_pod_uid", "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "0.log")
	if liveSize >= 0 {
		if err := os.WriteFile(path, []byte(strings.Repeat("x", liveSize)), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	rt := &rcRotationRuntime{
		states: map[string]runtimeapi.ContainerState{"c1": runtimeapi.ContainerState_CONTAINER_RUNNING},
		paths:  map[string]string{"c1": path},
	}
	core, logs := observer.New(zapcore.DebugLevel)
	env := &rcRotationEnv{rt: rt, path: path, now: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), logs: logs}
	env.r = newLogRotator(rt, maxSize, maxFiles, zap.New(core))
	env.r.now = func() time.Time { return env.now }
	return env
}

// files lists the names in the log's directory.
func (e *rcRotationEnv) files(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(e.path))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, en := range entries {
		out = append(out, en.Name())
	}
	sort.Strings(out)
	return out
}

func rcFileContent(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func rcGunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("gzip %s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip %s: %v", path, err)
	}
	return string(b)
}

func TestLogRotationRotatesLargeLog(t *testing.T) {
	t.Parallel()
	env := newRCRotationEnv(t, 1024, 5, 2048)
	env.r.rotateAll(context.Background())
	if got, want := env.files(t), []string{"0.log", "0.log.20240102-030405"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	if rcFileContent(t, env.path) != "" || len(rcFileContent(t, env.path+".20240102-030405")) != 2048 {
		t.Error("the rotated file should hold the old content and the live one start empty")
	}
	if _, reopens := env.rt.counts(); reopens != 1 {
		t.Errorf("%d reopens, want 1", reopens)
	}
}

func TestLogRotationSkips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		size   int
		state  runtimeapi.ContainerState
		mutate func(*rcRotationEnv)
	}{
		{desc: "below the limit", size: 1023, state: runtimeapi.ContainerState_CONTAINER_RUNNING},
		{desc: "exited container", size: 4096, state: runtimeapi.ContainerState_CONTAINER_EXITED},
		{desc: "no log path", size: 4096, state: runtimeapi.ContainerState_CONTAINER_RUNNING, mutate: func(e *rcRotationEnv) { e.rt.paths["c1"] = "" }},
		{
			// cri-dockerd's containers: the log path links to Docker's
			// json-file log (outside the directory, which stays as it is).
			desc: "log path is a symlink", size: -1, state: runtimeapi.ContainerState_CONTAINER_RUNNING,
			mutate: func(e *rcRotationEnv) {
				target := filepath.Join(filepath.Dir(filepath.Dir(e.path)), "docker-json.log")
				if err := os.WriteFile(target, []byte(strings.Repeat("x", 4096)), 0o640); err != nil {
					panic(err)
				}
				if err := os.Symlink(target, e.path); err != nil {
					panic(err)
				}
			},
		},
		{
			desc: "rotated less than a second ago", size: 4096, state: runtimeapi.ContainerState_CONTAINER_RUNNING,
			mutate: func(e *rcRotationEnv) {
				if err := os.WriteFile(e.path+".20240102-030405.gz", nil, 0o640); err != nil {
					panic(err)
				}
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			env := newRCRotationEnv(t, 1024, 5, tc.size)
			env.rt.states["c1"] = tc.state
			if tc.mutate != nil {
				tc.mutate(env)
			}
			before := env.files(t)
			env.r.rotateAll(context.Background())
			if got := env.files(t); !reflect.DeepEqual(got, before) {
				t.Errorf("files %v changed to %v", before, got)
			}
			if _, reopens := env.rt.counts(); reopens != 0 {
				t.Errorf("%d reopens, want none", reopens)
			}
		})
	}
}

func TestLogRotationMissingLiveLogIsReopened(t *testing.T) {
	t.Parallel()
	env := newRCRotationEnv(t, 1024, 5, -1)
	env.r.rotateAll(context.Background())
	if _, reopens := env.rt.counts(); reopens != 1 {
		t.Fatalf("%d reopens, want 1", reopens)
	}
	if got := env.files(t); !reflect.DeepEqual(got, []string{"0.log"}) {
		t.Errorf("files = %v", got)
	}
}

func TestLogRotationReopenFailure(t *testing.T) {
	t.Parallel()
	env := newRCRotationEnv(t, 1024, 5, 2048)
	env.rt.reopenErr = grpcstatus.Error(codes.FailedPrecondition, "container is not running")
	ctx := context.Background()

	env.r.rotateAll(ctx)
	if got := env.files(t); !reflect.DeepEqual(got, []string{"0.log"}) || len(rcFileContent(t, env.path)) != 2048 {
		t.Fatalf("files = %v: the live log must be renamed back intact", got)
	}
	statuses, reopens := env.rt.counts()
	if reopens != 1 {
		t.Fatalf("%d reopens, want 1", reopens)
	}
	// Further rounds within the back-off leave the container alone.
	for i := 0; i < 5; i++ {
		env.now = env.now.Add(time.Second)
		env.r.rotateAll(ctx)
	}
	if s, r := env.rt.counts(); s != statuses || r != reopens {
		t.Fatalf("retried during back-off: %d status calls, %d reopens", s, r)
	}
	// After the back-off it is retried; a second failure backs off longer and is not
	// logged again at warning level.
	env.now = env.now.Add(rotationRetryInitial)
	env.r.rotateAll(ctx)
	if _, r := env.rt.counts(); r != 2 {
		t.Fatalf("%d reopens after the back-off, want 2", r)
	}
	if f := env.r.failures["c1"]; f == nil || f.count != 2 || f.retryAt.Sub(env.now) != 2*rotationRetryInitial {
		t.Fatalf("failure record = %+v", f)
	}
	if n := env.logs.FilterLevelExact(zapcore.WarnLevel).Len(); n != 1 {
		t.Errorf("%d warnings, want one per failure streak", n)
	}
	// Success clears the record.
	env.rt.mu.Lock()
	env.rt.reopenErr = nil
	env.rt.mu.Unlock()
	env.now = env.now.Add(rotationRetryMax)
	env.r.rotateAll(ctx)
	if _, ok := env.r.failures["c1"]; ok {
		t.Error("failure record kept after a successful rotation")
	}
	if got := env.files(t); len(got) != 2 {
		t.Errorf("files = %v, want the live and one rotated log", got)
	}
}

func TestLogRotationForgetsGoneContainers(t *testing.T) {
	t.Parallel()
	env := newRCRotationEnv(t, 1024, 5, 2048)
	env.rt.reopenErr = errors.New("boom")
	env.r.rotateAll(context.Background())
	if env.r.failures["c1"] == nil {
		t.Fatal("no failure recorded")
	}
	env.rt.mu.Lock()
	delete(env.rt.states, "c1")
	env.rt.mu.Unlock()
	env.r.rotateAll(context.Background())
	if len(env.r.failures) != 0 {
		t.Errorf("failures = %v, want none for a container that is gone", env.r.failures)
	}
}

func TestLogRotationMaxFilesAndCompression(t *testing.T) {
	t.Parallel()
	env := newRCRotationEnv(t, 1024, 4, 2048)
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(filepath.Dir(env.path), name), []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	write("0.log.20240101-000001.gz", "old gz 1")
	write("0.log.20240101-000002.gz", "old gz 2")
	write("0.log.20240101-000002", "already compressed copy")
	write("0.log.20240101-000003", "newest rotated")
	write("0.log.20240101-000003.tmp", "interrupted compression")
	write("1.log.20240101-000001", "another container instance: untouched")

	env.r.rotateAll(context.Background())
	want := []string{"0.log", "0.log.20240101-000002.gz", "0.log.20240101-000003.gz", "0.log.20240102-030405", "1.log.20240101-000001"}
	if got := env.files(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	if got := rcGunzip(t, env.path+".20240101-000003.gz"); got != "newest rotated" {
		t.Errorf("compressed content = %q", got)
	}
	if got := len(rcFileContent(t, env.path+".20240102-030405")); got != 2048 {
		t.Errorf("newest rotated log has %d bytes, want 2048 (uncompressed)", got)
	}

	// The next rotation compresses the previous one and keeps 4 files in all.
	if err := os.WriteFile(env.path, []byte(strings.Repeat("y", 4096)), 0o640); err != nil {
		t.Fatal(err)
	}
	env.now = env.now.Add(time.Minute)
	env.r.rotateAll(context.Background())
	want = []string{"0.log", "0.log.20240101-000003.gz", "0.log.20240102-030405.gz", "0.log.20240102-030505", "1.log.20240101-000001"}
	if got := env.files(t); !reflect.DeepEqual(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	if got := len(rcGunzip(t, env.path+".20240102-030405.gz")); got != 2048 {
		t.Errorf("compressed log holds %d bytes, want 2048", got)
	}
}

// rcReopeningRuntime is the cri-api fake runtime whose ReopenContainerLog creates the
// live log file.
type rcReopeningRuntime struct {
	*critest.FakeRuntimeService
}

func (r *rcReopeningRuntime) ReopenContainerLog(ctx context.Context, id string) error {
	if err := r.FakeRuntimeService.ReopenContainerLog(ctx, id); err != nil {
		return err
	}
	resp, err := r.ContainerStatus(ctx, id, false)
	if err != nil {
		return err
	}
	return os.WriteFile(resp.GetStatus().GetLogPath(), nil, 0o640)
}

func TestRotateLogsLoop(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	running := filepath.Join(dir, "running.log")
	exited := filepath.Join(dir, "exited.log")
	for _, p := range []string{running, exited} {
		if err := os.WriteFile(p, []byte(strings.Repeat("z", 300)), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	fake := critest.NewFakeRuntimeService()
	fake.SetFakeContainers([]*critest.FakeContainer{
		{ContainerStatus: runtimeapi.ContainerStatus{Id: "r", State: runtimeapi.ContainerState_CONTAINER_RUNNING, LogPath: running, Metadata: &runtimeapi.ContainerMetadata{Name: "r"}}},
		{ContainerStatus: runtimeapi.ContainerStatus{Id: "e", State: runtimeapi.ContainerState_CONTAINER_EXITED, LogPath: exited, Metadata: &runtimeapi.ContainerMetadata{Name: "e"}}},
	})
	env := newRCEnv(t, func(o *Options) {
		o.Runtime = &rcReopeningRuntime{FakeRuntimeService: fake}
		o.ContainerLogMaxSize = 100
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { env.m.rotateLogsLoop(ctx); close(done) }()

	deadline := time.Now().Add(5 * time.Second)
	for {
		matches, _ := filepath.Glob(running + ".*")
		if len(matches) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first round did not rotate the running container's log")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("rotateLogsLoop did not stop")
	}
	if matches, _ := filepath.Glob(exited + ".*"); len(matches) != 0 {
		t.Errorf("exited container's log rotated: %v", matches)
	}
	if fi, err := os.Stat(running); err != nil || fi.Size() != 0 {
		t.Errorf("live log after reopen: %v %v", fi, err)
	}
}

// containerLogMaxWorkers rotates several containers at once; every one is
// rotated, each once.
func TestLogRotationWorkers(t *testing.T) {
	t.Parallel()
	rt := &rcRotationRuntime{states: map[string]runtimeapi.ContainerState{}, paths: map[string]string{}}
	dir := t.TempDir()
	for i := range 6 {
		id := fmt.Sprintf("c%d", i)
		p := filepath.Join(dir, id, "0.log")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, 2048), 0o640); err != nil {
			t.Fatal(err)
		}
		rt.states[id], rt.paths[id] = runtimeapi.ContainerState_CONTAINER_RUNNING, p
	}
	rt.hold = func() {
		// The first rotations wait for each other until three ran at once;
		// later ones linger a moment, time for a fourth to sneak in.
		holdUntil(t, "three rotations at once", func() bool { rt.mu.Lock(); defer rt.mu.Unlock(); return rt.maxInFlight >= 3 })
		time.Sleep(20 * time.Millisecond)
	}
	r := newLogRotator(rt, 1024, 5, zap.NewNop())
	r.workers = 3
	r.rotateAll(context.Background())
	if _, reopens := rt.counts(); reopens != 6 {
		t.Fatalf("%d reopens, want 6", reopens)
	}
	rt.mu.Lock()
	if rt.maxInFlight != 3 {
		t.Errorf("%d containers rotated at once, want 3 (containerLogMaxWorkers)", rt.maxInFlight)
	}
	rt.mu.Unlock()
	for id, p := range rt.paths {
		if fi, err := os.Stat(p); err != nil || fi.Size() != 0 {
			t.Errorf("%s: live log %v %v, want a new empty one", id, fi, err)
		}
	}
}
