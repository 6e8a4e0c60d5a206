package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func int64p(v int64) *int64 { return &v }

// runningEnv syncs pod into a fresh env so its containers run.
func runningEnv(t *testing.T, pod *v1.Pod) *testEnv {
	t.Helper()
	e := newTestEnv(t)
	for i := 0; i < 3; i++ { // init containers need a few rounds
		r := e.syncOnce(t, pod, nil)
		if err := r.Error(); err != nil {
			t.Fatalf("SyncPod: %v", err)
		}
	}
	return e
}

func TestKillPodGracePeriod(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc     string
		mutate   func(pod *v1.Pod)
		override *int64
		want     int64
	}{
		{desc: "the pod's terminationGracePeriodSeconds", want: 30},
		{desc: "an override", override: int64p(5), want: 5},
		{desc: "an override of 0 still gets the minimum", override: int64p(0), want: minimumGracePeriodInSeconds},
		{desc: "the deletion grace period of a pod being deleted", mutate: func(pod *v1.Pod) { pod.DeletionGracePeriodSeconds = int64p(7) }, want: 7},
		{desc: "no grace period: the minimum", mutate: func(pod *v1.Pod) { pod.Spec.TerminationGracePeriodSeconds = nil }, want: minimumGracePeriodInSeconds},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := testPod("a", "b")
			e := runningEnv(t, pod)
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			if err := e.m.KillPod(context.Background(), pod, nil, tc.override); err != nil {
				t.Fatalf("KillPod: %v", err)
			}
			stops := e.runtime.stopCalls()
			if len(stops) != 2 {
				t.Fatalf("stops = %+v, want 2", stops)
			}
			for _, s := range stops {
				if s.timeout != tc.want {
					t.Errorf("StopContainer(%s) timeout = %d, want %d", s.id, s.timeout, tc.want)
				}
			}
			for _, sb := range e.runtime.Sandboxes {
				if sb.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
					t.Errorf("sandbox %s still ready", sb.Id)
				}
			}
			for _, c := range append(e.containersNamed("a"), e.containersNamed("b")...) {
				if c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
					t.Errorf("container %s state %v, want exited", c.Id, c.State)
				}
			}
		})
	}
}

func TestKillPodPreStop(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc      string
		grace     int64
		preStop   *v1.LifecycleHandler
		execErr   error
		want      int64 // StopContainer timeout
		minTook   time.Duration
		maxTook   time.Duration
		wantExec  bool
		wantEvent string
	}{
		{
			desc: "exec hook runs before the stop", grace: 30, want: 30, maxTook: time.Second, wantExec: true,
			preStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/drain"}}},
		},
		{
			desc: "a failing hook does not prevent the stop", grace: 30, want: 30, maxTook: time.Second, wantExec: true,
			preStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/drain"}}},
			execErr: errors.New("exit status 3"), wantEvent: "FailedPreStopHook",
		},
		{
			desc: "the hook's time is taken from the grace period", grace: 10, want: 9, minTook: time.Second, maxTook: 3 * time.Second,
			preStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 1}},
		},
		{
			desc: "a hook longer than the grace period is cut short", grace: 1, want: minimumGracePeriodInSeconds,
			minTook: time.Second, maxTook: 3 * time.Second,
			preStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 30}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := testPod("a")
			pod.Spec.TerminationGracePeriodSeconds = int64p(tc.grace)
			pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: tc.preStop}
			e := runningEnv(t, pod)
			if tc.execErr != nil {
				e.runtime.InjectError("ExecSync", tc.execErr)
			}
			start := time.Now()
			if err := e.m.KillPod(context.Background(), pod, nil, nil); err != nil {
				t.Fatalf("KillPod: %v", err)
			}
			took := time.Since(start)
			if took < tc.minTook || took > tc.maxTook {
				t.Errorf("KillPod took %v, want between %v and %v", took, tc.minTook, tc.maxTook)
			}
			stops := e.runtime.stopCalls()
			// The hook's whole seconds are taken from the grace period: one
			// more when a loaded machine made it run a second late.
			late := tc.minTook > 0 && took >= tc.minTook+time.Second && tc.want > minimumGracePeriodInSeconds
			if len(stops) != 1 || (stops[0].timeout != tc.want && !(late && stops[0].timeout == tc.want-1)) {
				t.Errorf("stops = %+v, want one with timeout %d", stops, tc.want)
			}
			if got := len(e.runtime.execs) == 1 && e.runtime.execs[0][0] == "/bin/drain"; got != tc.wantExec {
				t.Errorf("execs = %v, want exec %v", e.runtime.execs, tc.wantExec)
			}
			if tc.wantEvent != "" && !e.recorder.has(tc.wantEvent) {
				t.Errorf("no %s event: %v", tc.wantEvent, e.recorder.events())
			}
		})
	}
}

func TestKillPodOrphanFromLabels(t *testing.T) {
	t.Parallel()
	pod := testPod("a")
	pod.Spec.TerminationGracePeriodSeconds = int64p(12)
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/bye"}}}}
	e := runningEnv(t, pod)

	pods, err := e.m.GetPods(context.Background(), false)
	if err != nil || len(pods) != 1 {
		t.Fatalf("GetPods = %v, %v", pods, err)
	}
	// The kubelet no longer knows the pod: the spec comes from the labels.
	if err := e.m.KillPod(context.Background(), nil, pods[0], nil); err != nil {
		t.Fatalf("KillPod: %v", err)
	}
	stops := e.runtime.stopCalls()
	if len(stops) != 1 || stops[0].timeout != 12 {
		t.Errorf("stops = %+v, want one with the recorded grace 12", stops)
	}
	if len(e.runtime.execs) != 1 || e.runtime.execs[0][0] != "/bin/bye" {
		t.Errorf("execs = %v, want the recorded preStop hook", e.runtime.execs)
	}
	if e.calls("StopPodSandbox") != 1 {
		t.Errorf("StopPodSandbox calls = %d, want 1", e.calls("StopPodSandbox"))
	}
}

func TestKillPodErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		inject  map[string]error
		wantErr error
	}{
		{desc: "container already gone", inject: map[string]error{"StopContainer": status.Error(codes.NotFound, "no such container")}},
		{desc: "sandbox already gone", inject: map[string]error{"StopPodSandbox": status.Error(codes.NotFound, "no such sandbox")}},
		{desc: "stop fails", inject: map[string]error{"StopContainer": errors.New("daemon busy")}, wantErr: kubecontainer.ErrKillContainer},
		{desc: "sandbox stop fails", inject: map[string]error{"StopPodSandbox": errors.New("cni teardown failed")}, wantErr: kubecontainer.ErrKillPodSandbox},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := testPod("a")
			e := runningEnv(t, pod)
			for call, err := range tc.inject {
				e.runtime.InjectError(call, err)
			}
			err := e.m.KillPod(context.Background(), pod, nil, nil)
			if tc.wantErr == nil && err != nil {
				t.Fatalf("KillPod: %v", err)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("KillPod error = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestKillPodStopsSidecarsLast(t *testing.T) {
	t.Parallel()
	pod := sidecarPod(v1.RestartPolicyAlways)
	pod.Spec.InitContainers = pod.Spec.InitContainers[:1] // s0 only
	e := runningEnv(t, pod)
	if len(e.containersNamed("s0")) != 1 || len(e.containersNamed("c")) != 1 {
		t.Fatalf("setup: calls %v", e.runtime.GetCalls())
	}
	if err := e.m.KillPod(context.Background(), pod, nil, nil); err != nil {
		t.Fatalf("KillPod: %v", err)
	}
	stops := e.runtime.stopCalls()
	if len(stops) != 2 || !strings.HasSuffix(stops[0].id, "_c_0") || !strings.HasSuffix(stops[1].id, "_s0_0") {
		t.Errorf("stops = %+v, want c then s0", stops)
	}
}

func TestTerminationGracePeriod(t *testing.T) {
	t.Parallel()
	probeGrace := &v1.Probe{TerminationGracePeriodSeconds: int64p(3)}
	tests := []struct {
		desc   string
		pod    *v1.Pod
		spec   *v1.Container
		reason containerKillReason
		want   int64
	}{
		{desc: "pod grace", pod: testPod(), spec: &v1.Container{}, want: 30},
		{desc: "liveness probe grace on liveness failure", pod: testPod(), spec: &v1.Container{LivenessProbe: probeGrace}, reason: reasonLivenessProbe, want: 3},
		{desc: "startup probe grace on startup failure", pod: testPod(), spec: &v1.Container{StartupProbe: probeGrace}, reason: reasonStartupProbe, want: 3},
		{desc: "probe grace ignored for other reasons", pod: testPod(), spec: &v1.Container{LivenessProbe: probeGrace}, want: 30},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := terminationGracePeriod(tc.pod, tc.spec, tc.reason); got != tc.want {
				t.Errorf("terminationGracePeriod = %d, want %d", got, tc.want)
			}
		})
	}
}
