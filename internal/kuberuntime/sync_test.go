package kuberuntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// syncOnce reads the pod's status from the fake runtime and syncs it.
func (e *testEnv) syncOnce(t *testing.T, pod *v1.Pod, backOff *flowcontrol.Backoff) kubecontainer.PodSyncResult {
	t.Helper()
	status, err := e.m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatalf("GetPodStatus: %v", err)
	}
	return e.m.SyncPod(context.Background(), pod, status, nil, backOff, false)
}

// containersNamed returns the fake runtime's containers of that name.
func (e *testEnv) containersNamed(name string) []*runtimeapi.ContainerStatus {
	e.runtime.Lock()
	defer e.runtime.Unlock()
	var out []*runtimeapi.ContainerStatus
	for _, c := range e.runtime.Containers {
		if c.Metadata.Name == name {
			out = append(out, proto.Clone(&c.ContainerStatus).(*runtimeapi.ContainerStatus))
		}
	}
	return out
}

// exitContainers makes every running container of that name exit.
func (e *testEnv) exitContainers(name string, code int32, at time.Time) {
	e.runtime.Lock()
	defer e.runtime.Unlock()
	for _, c := range e.runtime.Containers {
		if c.Metadata.Name == name && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.State = runtimeapi.ContainerState_CONTAINER_EXITED
			c.ExitCode = code
			c.FinishedAt = at.UnixNano()
		}
	}
}

func (e *testEnv) calls(name string) int {
	n := 0
	for _, c := range e.runtime.GetCalls() {
		if c == name {
			n++
		}
	}
	return n
}

// resultFor finds the result of an action on a target.
func resultFor(r kubecontainer.PodSyncResult, action kubecontainer.SyncAction, target string) *kubecontainer.SyncResult {
	for _, sr := range r.SyncResults {
		if sr.Action == action && sr.Target == target {
			return sr
		}
	}
	return nil
}

func TestSyncPod(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc   string
		mutate func(pod *v1.Pod)
		setup  func(e *testEnv)
		check  func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult)
	}{
		{
			desc: "new pod: sandbox, then every container created and started with labels",
			check: func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult) {
				if err := r.Error(); err != nil {
					t.Fatalf("SyncPod: %v", err)
				}
				if e.calls("RunPodSandbox") != 1 || e.calls("CreateContainer") != 2 || e.calls("StartContainer") != 2 {
					t.Fatalf("calls = %v", e.runtime.GetCalls())
				}
				for i, name := range []string{"a", "b"} {
					cs := e.containersNamed(name)
					if len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
						t.Fatalf("container %s: %+v", name, cs)
					}
					c := cs[0]
					if c.Labels[podUIDLabel] != "uid-1" || c.Labels[containerNameLabel] != name ||
						c.Labels[podNameLabel] != "web" || c.Labels[podNamespaceLabel] != "default" {
						t.Errorf("labels of %s = %v", name, c.Labels)
					}
					info := getAnnotatedInfo(c.Annotations, e.m.logger)
					if info.Hash != hashContainer(&pod.Spec.Containers[i]) || info.RestartCount != 0 ||
						info.PodTerminationGracePeriod == nil || *info.PodTerminationGracePeriod != 30 ||
						info.TerminationMessagePath != "/dev/termination-log" {
						t.Errorf("annotations of %s = %v", name, c.Annotations)
					}
				}
				for _, sb := range e.runtime.Sandboxes {
					if sb.Labels[podUIDLabel] != "uid-1" || sb.Labels["app"] != "web" || sb.Annotations["note"] != "x" {
						t.Errorf("sandbox labels %v annotations %v", sb.Labels, sb.Annotations)
					}
				}
				if !e.recorder.has(eventStarted) {
					t.Errorf("no Started event in %v", e.recorder.events())
				}
			},
		},
		{
			desc:   "runtimeClassName without RuntimeClasses (standalone): the default handler",
			mutate: func(pod *v1.Pod) { h := "runc-debug"; pod.Spec.RuntimeClassName = &h },
			check: func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult) {
				for _, sb := range e.runtime.Sandboxes {
					if sb.RuntimeHandler != "" {
						t.Errorf("runtime handler = %q, want the default", sb.RuntimeHandler)
					}
				}
			},
		},
		{
			desc:  "sandbox creation fails: no container is created",
			setup: func(e *testEnv) { e.runtime.InjectError("RunPodSandbox", errors.New("cni down")) },
			check: func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult) {
				sr := resultFor(r, kubecontainer.CreatePodSandbox, formatPod(pod))
				if sr == nil || sr.Error != kubecontainer.ErrCreatePodSandbox || !strings.Contains(sr.Message, "cni down") {
					t.Fatalf("CreatePodSandbox result = %+v", sr)
				}
				if e.calls("CreateContainer") != 0 {
					t.Errorf("containers created without a sandbox: %v", e.runtime.GetCalls())
				}
				if !e.recorder.has(eventFailedCreatePodSandBox) {
					t.Errorf("no FailedCreatePodSandBox event: %v", e.recorder.events())
				}
			},
		},
		{
			desc:  "image pull fails: ErrImagePull",
			setup: func(e *testEnv) { e.images.InjectError("PullImage", errors.New("registry unreachable")) },
			check: func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult) {
				sr := resultFor(r, kubecontainer.StartContainer, "a")
				if sr == nil || sr.Error != kubecontainer.ErrImagePull || !strings.Contains(sr.Message, "registry unreachable") {
					t.Fatalf("StartContainer a = %+v", sr)
				}
				if sr := resultFor(r, kubecontainer.StartContainer, "b"); sr == nil || sr.Error != kubecontainer.ErrImagePullBackOff {
					t.Errorf("StartContainer b (same image, in pull back-off) = %+v", sr)
				}
			},
		},
		{
			desc:   "invalid image name: InvalidImageName",
			mutate: func(pod *v1.Pod) { pod.Spec.Containers[0].Image = "Not A Valid::Image" },
			check: func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult) {
				if sr := resultFor(r, kubecontainer.StartContainer, "a"); sr == nil || sr.Error != kubecontainer.ErrInvalidImageName {
					t.Fatalf("StartContainer a = %+v", sr)
				}
				if sr := resultFor(r, kubecontainer.StartContainer, "b"); sr == nil || sr.Error != nil {
					t.Errorf("StartContainer b = %+v, want success", sr)
				}
			},
		},
		{
			desc: "image absent with pull policy Never: ErrImageNeverPull",
			mutate: func(pod *v1.Pod) {
				pod.Spec.Containers[1].ImagePullPolicy = v1.PullNever
				pod.Spec.Containers[1].Image = "other:1"
			},
			check: func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult) {
				if sr := resultFor(r, kubecontainer.StartContainer, "b"); sr == nil || sr.Error != kubecontainer.ErrImageNeverPull {
					t.Fatalf("StartContainer b = %+v", sr)
				}
			},
		},
		{
			desc:  "create container fails: CreateContainerError",
			setup: func(e *testEnv) { e.runtime.InjectError("CreateContainer", errors.New("no space")) },
			check: func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult) {
				if sr := resultFor(r, kubecontainer.StartContainer, "a"); sr == nil || sr.Error != kubecontainer.ErrCreateContainer || sr.Message != "no space" {
					t.Fatalf("StartContainer a = %+v", sr)
				}
			},
		},
		{
			desc:  "start container fails: RunContainerError",
			setup: func(e *testEnv) { e.runtime.InjectError("StartContainer", errors.New("exec format error")) },
			check: func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult) {
				if sr := resultFor(r, kubecontainer.StartContainer, "a"); sr == nil || sr.Error != kubecontainer.ErrRunContainer {
					t.Fatalf("StartContainer a = %+v", sr)
				}
			},
		},
		{
			desc: "postStart hook fails: the container is killed, PostStartHookError",
			mutate: func(pod *v1.Pod) {
				pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
			},
			setup: func(e *testEnv) { e.runtime.InjectError("ExecSync", errors.New("exit status 1")) },
			check: func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult) {
				sr := resultFor(r, kubecontainer.StartContainer, "a")
				if sr == nil || sr.Error != kubecontainer.ErrPostStartHook || !strings.Contains(sr.Message, "Exec lifecycle hook ([false])") {
					t.Fatalf("StartContainer a = %+v", sr)
				}
				stops := e.runtime.stopCalls()
				if len(stops) != 1 || !strings.HasSuffix(stops[0].id, "_a_0") || stops[0].timeout != 30 {
					t.Errorf("stops = %+v, want container a stopped with grace 30", stops)
				}
				if !e.recorder.has(eventFailedPostStartHook) {
					t.Errorf("no FailedPostStartHook event: %v", e.recorder.events())
				}
			},
		},
		{
			desc: "postStart hook succeeds",
			mutate: func(pod *v1.Pod) {
				pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
			},
			check: func(t *testing.T, e *testEnv, pod *v1.Pod, r kubecontainer.PodSyncResult) {
				if err := r.Error(); err != nil {
					t.Fatalf("SyncPod: %v", err)
				}
				if len(e.runtime.execs) != 1 || e.runtime.execs[0][0] != "true" {
					t.Errorf("execs = %v", e.runtime.execs)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			pod := testPod("a", "b")
			pod.Labels = map[string]string{"app": "web"}
			pod.Annotations = map[string]string{"note": "x"}
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			if tc.setup != nil {
				tc.setup(e)
			}
			tc.check(t, e, pod, e.syncOnce(t, pod, nil))
		})
	}
}

func TestSyncPodRestartsAndCrashLoopBackOff(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	clock := testingclock.NewFakeClock(time.Now())
	backOff := flowcontrol.NewFakeBackOff(10*time.Second, 300*time.Second, clock)
	pod := testPod("app")

	mustStart := func(wantRestartCount int) {
		t.Helper()
		r := e.syncOnce(t, pod, backOff)
		if err := r.Error(); err != nil {
			t.Fatalf("SyncPod (restart %d): %v", wantRestartCount, err)
		}
		var running *runtimeapi.ContainerStatus
		for _, c := range e.containersNamed("app") {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				running = c
			}
		}
		if running == nil {
			t.Fatalf("no running app container after restart %d", wantRestartCount)
		}
		if got := getAnnotatedInfo(running.Annotations, e.m.logger).RestartCount; got != wantRestartCount {
			t.Errorf("restartCount annotation = %d, want %d", got, wantRestartCount)
		}
		if running.Metadata.Attempt != uint32(wantRestartCount) {
			t.Errorf("attempt = %d, want %d", running.Metadata.Attempt, wantRestartCount)
		}
	}
	mustBackOff := func(want string) {
		t.Helper()
		r := e.syncOnce(t, pod, backOff)
		sr := resultFor(r, kubecontainer.StartContainer, "app")
		if sr == nil || sr.Error != kubecontainer.ErrCrashLoopBackOff || sr.Message != want {
			t.Fatalf("StartContainer = %+v, want CrashLoopBackOff %q", sr, want)
		}
		if !errors.Is(r.Error(), kubecontainer.ErrCrashLoopBackOff) {
			t.Errorf("PodSyncResult.Error() = %v, want it to match ErrCrashLoopBackOff", r.Error())
		}
	}

	mustStart(0)
	e.exitContainers("app", 1, clock.Now())
	mustStart(1) // the first restart is immediate; the back-off is now 10s
	e.exitContainers("app", 1, clock.Now())
	mustBackOff("back-off 10s restarting failed container=app pod=web_default(uid-1)")
	clock.Step(11 * time.Second)
	mustStart(2)
	e.exitContainers("app", 1, clock.Now())
	mustBackOff("back-off 20s restarting failed container=app pod=web_default(uid-1)")
	clock.Step(21 * time.Second)
	mustStart(3)
	e.exitContainers("app", 2, clock.Now())
	mustBackOff("back-off 40s restarting failed container=app pod=web_default(uid-1)")
	if !e.recorder.has("BackOff") {
		t.Errorf("no BackOff event: %v", e.recorder.events())
	}
}

func TestSyncPodInitContainersInOrder(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	pod := initPod(v1.RestartPolicyAlways)

	r := e.syncOnce(t, pod, nil)
	if err := r.Error(); err != nil {
		t.Fatalf("first SyncPod: %v", err)
	}
	if len(e.containersNamed("i0")) != 1 || len(e.containersNamed("i1")) != 0 || len(e.containersNamed("c")) != 0 {
		t.Fatalf("after the first sync only i0 should exist: %v", e.runtime.GetCalls())
	}
	e.exitContainers("i0", 0, time.Now())
	if r := e.syncOnce(t, pod, nil); r.Error() != nil {
		err := r.Error()
		t.Fatalf("second SyncPod: %v", err)
	}
	if len(e.containersNamed("i1")) != 1 || len(e.containersNamed("c")) != 0 {
		t.Fatalf("after the second sync i1 should run")
	}
	e.exitContainers("i1", 0, time.Now())
	if r := e.syncOnce(t, pod, nil); r.Error() != nil {
		err := r.Error()
		t.Fatalf("third SyncPod: %v", err)
	}
	if len(e.containersNamed("c")) != 1 || len(e.containersNamed("i0")) != 1 || len(e.containersNamed("i1")) != 1 {
		t.Fatalf("after the third sync c should run and init containers not rerun")
	}
	// Nothing changes afterwards.
	before := e.calls("CreateContainer")
	if r := e.syncOnce(t, pod, nil); r.Error() != nil {
		err := r.Error()
		t.Fatalf("fourth SyncPod: %v", err)
	}
	if e.calls("CreateContainer") != before {
		t.Errorf("a steady pod created containers")
	}
}

func TestSyncPodRecreatesSandbox(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	pod := initPod(v1.RestartPolicyAlways)
	pod.Spec.InitContainers = pod.Spec.InitContainers[:1]
	if r := e.syncOnce(t, pod, nil); r.Error() != nil {
		err := r.Error()
		t.Fatalf("SyncPod: %v", err)
	}
	e.exitContainers("i0", 0, time.Now())
	if r := e.syncOnce(t, pod, nil); r.Error() != nil {
		err := r.Error()
		t.Fatalf("SyncPod: %v", err)
	}
	// The sandbox dies (e.g. a reboot): the pod is killed, init containers are
	// removed and everything starts over in a new sandbox (attempt 1).
	e.runtime.Lock()
	for _, sb := range e.runtime.Sandboxes {
		sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	}
	e.runtime.Unlock()
	r := e.syncOnce(t, pod, nil)
	if err := r.Error(); err != nil {
		t.Fatalf("SyncPod after the sandbox died: %v", err)
	}
	if resultFor(r, kubecontainer.KillPodSandbox, "uid-1") == nil || resultFor(r, kubecontainer.CreatePodSandbox, formatPod(pod)) == nil {
		t.Fatalf("results = %+v", r.SyncResults)
	}
	if len(e.runtime.Sandboxes) != 2 {
		t.Fatalf("sandboxes = %d, want 2", len(e.runtime.Sandboxes))
	}
	i0 := e.containersNamed("i0")
	if len(i0) != 1 || i0[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING || !strings.Contains(i0[0].Id, "_1_i0_") {
		t.Errorf("i0 = %+v, want one running instance in the new sandbox", i0)
	}
	if !e.recorder.has(eventSandboxChanged) {
		t.Errorf("no SandboxChanged event: %v", e.recorder.events())
	}
}

func TestRestartCountFromLogDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc  string
		files []string
		want  int
	}{
		{desc: "no directory", files: nil, want: 0},
		{desc: "logs of earlier runs", files: []string{"0.log", "1.log", "3.log.20240101-000000.gz", "notes.txt"}, want: 4},
		{desc: "only foreign files", files: []string{"x.log", "log"}, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "c")
			for _, f := range tc.files {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := restartCountFromLogDir(dir); got != tc.want {
				t.Errorf("restartCountFromLogDir = %d, want %d", got, tc.want)
			}
		})
	}
}

// fakeClasses maps RuntimeClass names to handlers; a missing name is
// NotFound, as the informer's lister says.
type fakeClasses map[string]string

func (f fakeClasses) LookupRuntimeHandler(_ context.Context, name *string) (string, error) {
	if name == nil || *name == "" {
		return "", nil
	}
	h, ok := f[*name]
	if !ok {
		return "", apierrors.NewNotFound(schema.GroupResource{Group: "node.k8s.io", Resource: "runtimeclass"}, *name)
	}
	return h, nil
}

// A pod's RuntimeClass gives its sandbox's handler; a class that does not
// exist fails the sandbox with the lookup's error, nothing created.
func TestSyncPodRuntimeClass(t *testing.T) {
	t.Parallel()
	classes := fakeClasses{"debug": "runc-debug"}
	e := newTestEnv(t, func(o *Options) { o.RuntimeClasses = classes })
	pod := testPod()
	pod.Spec.RuntimeClassName = ptr.To("debug")
	if r := e.syncOnce(t, pod, nil); r.Error() != nil {
		t.Fatalf("SyncPod: %v", r.Error())
	}
	for _, sb := range e.runtime.Sandboxes {
		if sb.RuntimeHandler != "runc-debug" {
			t.Errorf("runtime handler = %q, want runc-debug", sb.RuntimeHandler)
		}
	}

	e = newTestEnv(t, func(o *Options) { o.RuntimeClasses = classes })
	pod = testPod()
	pod.Spec.RuntimeClassName = ptr.To("missing")
	r := e.syncOnce(t, pod, nil)
	const want = `Failed to create pod sandbox: runtimeclass.node.k8s.io "missing" not found`
	var msg string
	for _, res := range r.SyncResults {
		if res.Action == kubecontainer.CreatePodSandbox {
			msg = res.Message
		}
	}
	if msg != want || len(e.runtime.Sandboxes) != 0 {
		t.Errorf("sandbox result %q, %d sandboxes; want %q and none", msg, len(e.runtime.Sandboxes), want)
	}
	if !e.recorder.has(eventFailedCreatePodSandBox) {
		t.Errorf("no %s event in %v", eventFailedCreatePodSandBox, e.recorder.events())
	}
}
