package kuberuntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// fakePodState answers the GC's questions from sets of UIDs.
type fakePodState struct {
	contentRemoved, runtimeRemoved map[k8stypes.UID]bool
}

func (f fakePodState) IsPodTerminationRequested(uid k8stypes.UID) bool {
	return f.contentRemoved[uid] || f.runtimeRemoved[uid]
}
func (f fakePodState) ShouldPodContentBeRemoved(uid k8stypes.UID) bool { return f.contentRemoved[uid] }
func (f fakePodState) ShouldPodRuntimeBeRemoved(uid k8stypes.UID) bool {
	return f.contentRemoved[uid] || f.runtimeRemoved[uid]
}

// gcCtr is a container for GC tests: age is how long ago it was created.
type gcCtr struct {
	id, uid, name, sandbox string
	attempt                uint32
	age                    time.Duration
	state                  runtimeapi.ContainerState
}

type gcSb struct {
	id, uid string
	attempt uint32
	ready   bool
}

const (
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

func TestGarbageCollect(t *testing.T) {
	t.Parallel()
	h := time.Hour
	// Pod uid-1 has the dead instances a0..a2 and the running a3 of "app".
	app := []gcCtr{
		{id: "a0", uid: "uid-1", name: "app", sandbox: "s1", attempt: 0, age: 4 * h, state: exited},
		{id: "a1", uid: "uid-1", name: "app", sandbox: "s1", attempt: 1, age: 3 * h, state: exited},
		{id: "a2", uid: "uid-1", name: "app", sandbox: "s1", attempt: 2, age: 2 * time.Minute, state: exited},
		{id: "a3", uid: "uid-1", name: "app", sandbox: "s1", attempt: 3, age: time.Minute, state: running},
	}
	// Pod uid-2 has two dead instances of "job" and one of "side".
	job := []gcCtr{
		{id: "j0", uid: "uid-2", name: "job", sandbox: "s2", attempt: 0, age: 5 * h, state: exited},
		{id: "j1", uid: "uid-2", name: "job", sandbox: "s2", attempt: 1, age: 4 * h, state: exited},
		{id: "x0", uid: "uid-2", name: "side", sandbox: "s2", attempt: 0, age: 4 * h, state: exited},
	}
	sandboxes := []gcSb{{id: "s1", uid: "uid-1", ready: true}, {id: "s2", uid: "uid-2"}}
	tests := []struct {
		desc            string
		containers      []gcCtr
		sandboxes       []gcSb
		policy          kubecontainer.GCPolicy
		allSourcesReady bool
		evictNonDeleted bool
		state           fakePodState
		wantContainers  []string
		wantSandboxes   []string
		wantStopped     []string
	}{
		{
			desc:       "default policy: the newest dead instance of each container stays",
			containers: append(append([]gcCtr{}, app...), job...), sandboxes: sandboxes,
			policy: kubecontainer.DefaultGCPolicy(), allSourcesReady: true,
			wantContainers: []string{"a2", "a3", "j1", "x0"}, wantSandboxes: []string{"s1", "s2"},
		},
		{
			desc:       "no per-container limit: everything stays",
			containers: append(append([]gcCtr{}, app...), job...), sandboxes: sandboxes,
			policy:         kubecontainer.GCPolicy{MaxPerPodContainer: -1, MaxContainers: -1},
			wantContainers: []string{"a0", "a1", "a2", "a3", "j0", "j1", "x0"}, wantSandboxes: []string{"s1", "s2"},
		},
		{
			desc:       "MinAge: young dead containers stay",
			containers: app, sandboxes: sandboxes[:1],
			policy:         kubecontainer.GCPolicy{MinAge: time.Hour, MaxPerPodContainer: 0, MaxContainers: -1},
			wantContainers: []string{"a2", "a3"}, wantSandboxes: []string{"s1"},
		},
		{
			desc:       "MaxContainers: an equal share per container, the newest kept",
			containers: append(append([]gcCtr{}, app...), job...), sandboxes: sandboxes,
			policy:         kubecontainer.GCPolicy{MaxPerPodContainer: -1, MaxContainers: 3},
			wantContainers: []string{"a2", "a3", "j1", "x0"}, wantSandboxes: []string{"s1", "s2"},
		},
		{
			desc:       "MaxContainers below one per container: the oldest go",
			containers: append(append([]gcCtr{}, app...), job...), sandboxes: sandboxes,
			policy:         kubecontainer.GCPolicy{MaxPerPodContainer: -1, MaxContainers: 1},
			wantContainers: []string{"a2", "a3"}, wantSandboxes: []string{"s1", "s2"},
		},
		{
			desc:       "deleted pod: all of it goes, sandbox included",
			containers: append(append([]gcCtr{}, app...), job...), sandboxes: sandboxes,
			policy: kubecontainer.DefaultGCPolicy(), allSourcesReady: true,
			state:          fakePodState{contentRemoved: map[k8stypes.UID]bool{"uid-2": true}},
			wantContainers: []string{"a2", "a3"}, wantSandboxes: []string{"s1"},
		},
		{
			desc:       "deleted pod but the sources are not all ready: only the policy applies",
			containers: job, sandboxes: sandboxes[1:],
			policy:         kubecontainer.DefaultGCPolicy(),
			state:          fakePodState{contentRemoved: map[k8stypes.UID]bool{"uid-2": true}},
			wantContainers: []string{"j1", "x0"}, wantSandboxes: []string{"s2"},
		},
		{
			desc:       "terminated pod with evictNonDeletedPods: its runtime goes",
			containers: job, sandboxes: sandboxes[1:],
			policy: kubecontainer.DefaultGCPolicy(), allSourcesReady: true, evictNonDeleted: true,
			state:          fakePodState{runtimeRemoved: map[k8stypes.UID]bool{"uid-2": true}},
			wantContainers: nil, wantSandboxes: nil,
		},
		{
			desc:       "terminated pod without evictNonDeletedPods: only the policy applies",
			containers: job, sandboxes: sandboxes[1:],
			policy: kubecontainer.DefaultGCPolicy(), allSourcesReady: true,
			state:          fakePodState{runtimeRemoved: map[k8stypes.UID]bool{"uid-2": true}},
			wantContainers: []string{"j1", "x0"}, wantSandboxes: []string{"s2"},
		},
		{
			desc: "dead sandboxes without containers go, the newest of a live pod stays",
			sandboxes: []gcSb{
				{id: "p0", uid: "uid-3", attempt: 0}, {id: "p1", uid: "uid-3", attempt: 1}, {id: "p2", uid: "uid-3", attempt: 2},
				{id: "q0", uid: "uid-4", attempt: 0}, {id: "q1", uid: "uid-4", attempt: 1, ready: true},
			},
			policy:        kubecontainer.DefaultGCPolicy(),
			wantSandboxes: []string{"p2", "q1"},
		},
		{
			desc:           "a dead sandbox that still has containers stays",
			containers:     []gcCtr{{id: "k0", uid: "uid-3", name: "k", sandbox: "p0", age: time.Minute, state: running}},
			sandboxes:      []gcSb{{id: "p0", uid: "uid-3", attempt: 0}, {id: "p1", uid: "uid-3", attempt: 1}},
			policy:         kubecontainer.DefaultGCPolicy(),
			wantContainers: []string{"k0"},
			wantSandboxes:  []string{"p0", "p1"},
		},
		{
			desc: "a container in unknown state is stopped before removal",
			containers: []gcCtr{
				{id: "u0", uid: "uid-1", name: "app", sandbox: "s1", attempt: 0, age: h, state: unknown},
				{id: "u1", uid: "uid-1", name: "app", sandbox: "s1", attempt: 1, age: time.Minute, state: exited},
			},
			sandboxes: sandboxes[:1], policy: kubecontainer.DefaultGCPolicy(),
			wantContainers: []string{"u1"}, wantSandboxes: []string{"s1"}, wantStopped: []string{"u0"},
		},
		{
			desc:           "containers without a pod UID label are not the kubelet's",
			containers:     []gcCtr{{id: "z0", name: "foreign", age: h, state: exited}, {id: "z1", name: "foreign", attempt: 1, age: h, state: exited}},
			policy:         kubecontainer.GCPolicy{MaxPerPodContainer: 0, MaxContainers: -1},
			wantContainers: []string{"z0", "z1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			now := time.Now()
			var sbs []*critest.FakePodSandbox
			for _, s := range tc.sandboxes {
				state := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				if s.ready {
					state = runtimeapi.PodSandboxState_SANDBOX_READY
				}
				sbs = append(sbs, fakeSandbox(s.id, s.uid, s.attempt, state, now.UnixNano()+int64(s.attempt)))
			}
			var cs []*critest.FakeContainer
			for _, c := range tc.containers {
				fc := fakeCtr{id: c.id, uid: c.uid, name: c.name, sandbox: c.sandbox, state: c.state,
					created: now.Add(-c.age).UnixNano(), attempt: c.attempt}.build()
				if c.uid == "" {
					delete(fc.Labels, podUIDLabel)
				}
				cs = append(cs, fc)
			}
			e.runtime.SetFakeSandboxes(sbs)
			e.runtime.SetFakeContainers(cs)
			state := tc.state
			if err := e.m.GarbageCollect(context.Background(), tc.policy, tc.allSourcesReady, tc.evictNonDeleted, state); err != nil {
				t.Fatalf("GarbageCollect: %v", err)
			}
			var gotC, gotS, stopped []string
			for id := range e.runtime.Containers {
				gotC = append(gotC, id)
			}
			for id := range e.runtime.Sandboxes {
				gotS = append(gotS, id)
			}
			for _, s := range e.runtime.stopCalls() {
				stopped = append(stopped, s.id)
			}
			sort.Strings(gotC)
			sort.Strings(gotS)
			if !reflect.DeepEqual(gotC, tc.wantContainers) {
				t.Errorf("containers left = %v, want %v", gotC, tc.wantContainers)
			}
			if !reflect.DeepEqual(gotS, tc.wantSandboxes) {
				t.Errorf("sandboxes left = %v, want %v", gotS, tc.wantSandboxes)
			}
			if !reflect.DeepEqual(stopped, tc.wantStopped) {
				t.Errorf("stopped = %v, want %v", stopped, tc.wantStopped)
			}
		})
	}
}

func TestGarbageCollectLogs(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	mkdir := func(parts ...string) string {
		p := filepath.Join(append([]string{e.logsDir}, parts...)...)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write := func(p string) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	live := mkdir("default_web_uid-1", "app")
	deleted := mkdir("default_old_uid-2", "app")
	write(filepath.Join(deleted, "0.log"))
	write(filepath.Join(e.logsDir, "stray-file"))
	// Container logs go with their container: 0.log and its rotated copies,
	// but not 1.log (another instance) nor 10.log.
	for _, f := range []string{"0.log", "0.log.20240101-000000", "0.log.20240101-000000.gz", "1.log", "10.log"} {
		write(filepath.Join(live, f))
	}
	old := fakeCtr{id: "a0", uid: "uid-1", name: "app", sandbox: "s1", state: exited,
		created: time.Now().Add(-time.Hour).UnixNano(), logPath: filepath.Join(live, "0.log")}.build()
	cur := fakeCtr{id: "a1", uid: "uid-1", name: "app", sandbox: "s1", state: exited, attempt: 1,
		created: time.Now().UnixNano(), logPath: filepath.Join(live, "1.log")}.build()
	e.runtime.SetFakeContainers([]*critest.FakeContainer{old, cur})
	e.runtime.SetFakeSandboxes([]*critest.FakePodSandbox{fakeSandbox("s1", "uid-1", 0, runtimeapi.PodSandboxState_SANDBOX_READY, 1)})
	state := fakePodState{contentRemoved: map[k8stypes.UID]bool{"uid-2": true}}

	// Sources not ready: pod log directories stay.
	if err := e.m.GarbageCollect(context.Background(), kubecontainer.DefaultGCPolicy(), false, false, state); err != nil {
		t.Fatalf("GarbageCollect: %v", err)
	}
	if _, err := os.Stat(deleted); err != nil {
		t.Errorf("log dir of the deleted pod removed before all sources were ready: %v", err)
	}
	var left []string
	entries, _ := os.ReadDir(live)
	for _, en := range entries {
		left = append(left, en.Name())
	}
	if want := []string{"1.log", "10.log"}; !reflect.DeepEqual(left, want) {
		t.Errorf("container logs left = %v, want %v", left, want)
	}

	if err := e.m.GarbageCollect(context.Background(), kubecontainer.DefaultGCPolicy(), true, false, state); err != nil {
		t.Fatalf("GarbageCollect: %v", err)
	}
	if _, err := os.Stat(deleted); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("log dir of the deleted pod still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("log dir of the live pod removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.logsDir, "stray-file")); err != nil {
		t.Errorf("stray file removed: %v", err)
	}
}

func TestGarbageCollectErrors(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	if err := e.m.GarbageCollect(context.Background(), kubecontainer.DefaultGCPolicy(), true, false, nil); err == nil {
		t.Errorf("GarbageCollect without a pod state provider succeeded")
	}
	e.runtime.InjectError("ListContainers", errors.New("runtime down"))
	err := e.m.GarbageCollect(context.Background(), kubecontainer.DefaultGCPolicy(), true, false, fakePodState{})
	if err == nil || !strings.Contains(err.Error(), "runtime down") {
		t.Errorf("GarbageCollect error = %v, want the list failure", err)
	}
}

func TestPodUIDFromLogsDirectory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc, name string
		want       k8stypes.UID
	}{
		{desc: "pod directory", name: "kube-system_etcd-node1_0123-abcd", want: "0123-abcd"},
		{desc: "not a pod directory", name: "something", want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := podUIDFromLogsDirectory(tc.name); got != tc.want {
				t.Errorf("podUIDFromLogsDirectory(%q) = %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

// TestGarbageCollectSpan: with a tracer, a collection is upstream's
// Containers/GarbageCollect span, its runtime calls under it.
func TestGarbageCollectSpan(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	rec := tracetest.NewSpanRecorder()
	e.m.tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer(TracerName)
	if err := e.m.GarbageCollect(context.Background(), kubecontainer.DefaultGCPolicy(), true, false, fakePodState{}); err != nil {
		t.Fatal(err)
	}
	if s := rec.Ended(); len(s) != 1 || s[0].Name() != "Containers/GarbageCollect" || s[0].InstrumentationScope().Name != TracerName {
		t.Errorf("spans %v, want one Containers/GarbageCollect of scope %s", s, TracerName)
	}
}
