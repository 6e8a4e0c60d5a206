package apistatus

import (
	"net"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/podtest"
)

func newGenerator(t *testing.T) *Generator {
	g, err := New(Options{
		NodeIP:  net.ParseIP("192.168.1.10"),
		Status:  status.NewManager(status.Options{Logger: zaptest.NewLogger(t)}),
		Probes:  fakeProbes{},
		Reasons: NewReasonCache(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// fakeProbes marks running containers started and ready, and init containers
// that exited 0 ready.
type fakeProbes struct{}

func (fakeProbes) UpdatePodStatus(_ k8stypes.UID, st *v1.PodStatus) {
	podtest.MarkProbed(st)
}

func rtStatus(name, id string, state kubecontainer.State, created int64, code int) *kubecontainer.ContainerStatus {
	return &kubecontainer.ContainerStatus{
		ID: kubecontainer.ContainerID{Type: "docker", ID: id}, Name: name, State: state, ExitCode: code,
		CreatedAt: time.Unix(created, 0), StartedAt: time.Unix(created+1, 0), FinishedAt: time.Unix(created+5, 0),
		Image: "busybox:latest", ImageRef: "docker-pullable://busybox@sha256:abc", RestartCount: int(created / 100),
		Reason: "Error", Message: "boom",
	}
}

func readySandbox(ip string) []*runtimeapi.PodSandboxStatus {
	return []*runtimeapi.PodSandboxStatus{{State: runtimeapi.PodSandboxState_SANDBOX_READY, Network: &runtimeapi.PodSandboxNetworkStatus{Ip: ip}}}
}

func TestContainerStatusConversion(t *testing.T) {
	t.Parallel()
	g := newGenerator(t)
	pod := staticPod("p", "uid-p")
	ps := &kubecontainer.PodStatus{ID: pod.UID, IPs: []string{"10.1.0.5"}, SandboxStatuses: readySandbox("10.1.0.5"),
		ContainerStatuses: []*kubecontainer.ContainerStatus{
			rtStatus("c", "old", kubecontainer.StateExited, 100, 1),
			rtStatus("c", "new", kubecontainer.StateRunning, 200, 0),
			rtStatus("c", "older", kubecontainer.StateExited, 50, 2), // only the two newest count
		}}
	s := g.Generate(pod, ps, false)
	if len(s.ContainerStatuses) != 1 {
		t.Fatalf("statuses = %+v", s.ContainerStatuses)
	}
	c := s.ContainerStatuses[0]
	if c.ContainerID != "docker://new" || c.State.Running == nil || !c.State.Running.StartedAt.Time.Equal(time.Unix(201, 0)) {
		t.Errorf("state = %+v (id %s), want running docker://new", c.State, c.ContainerID)
	}
	lt := c.LastTerminationState.Terminated
	if lt == nil || lt.ExitCode != 1 || lt.ContainerID != "docker://old" || lt.Reason != "Error" || lt.Message != "boom" ||
		!lt.FinishedAt.Time.Equal(time.Unix(105, 0)) {
		t.Errorf("last state = %+v, want the previous instance", lt)
	}
	if c.RestartCount != 2 || c.Image != "busybox:latest" || c.ImageID != "docker-pullable://busybox@sha256:abc" {
		t.Errorf("status = %+v", c)
	}
	if c.Ready != true || c.Started == nil || !*c.Started {
		t.Error("prober readiness not applied")
	}
	if s.Phase != v1.PodRunning || s.PodIP != "10.1.0.5" || len(s.PodIPs) != 1 || s.HostIP != "192.168.1.10" ||
		len(s.HostIPs) != 1 || s.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("pod status = %+v", s)
	}
	wantConds := map[v1.PodConditionType]v1.ConditionStatus{
		v1.PodScheduled: v1.ConditionTrue, v1.PodReadyToStartContainers: v1.ConditionTrue, v1.PodInitialized: v1.ConditionTrue,
		v1.ContainersReady: v1.ConditionTrue, v1.PodReady: v1.ConditionTrue,
	}
	if len(s.Conditions) != len(wantConds) {
		t.Errorf("conditions = %+v", s.Conditions)
	}
	for _, cond := range s.Conditions {
		if wantConds[cond.Type] != cond.Status {
			t.Errorf("condition %s = %s, want %s", cond.Type, cond.Status, wantConds[cond.Type])
		}
	}
}

func TestWaitingReasons(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc       string
		policy     v1.RestartPolicy
		init       bool
		runtime    []*kubecontainer.ContainerStatus
		reason     *kubecontainer.SyncResult
		wantReason string
		wantLast   bool
	}{
		{desc: "not created yet", policy: v1.RestartPolicyAlways, wantReason: "ContainerCreating"},
		{desc: "not created, pod has init containers", policy: v1.RestartPolicyAlways, init: true, wantReason: "PodInitializing"},
		{desc: "image pull failure", policy: v1.RestartPolicyAlways,
			reason: &kubecontainer.SyncResult{Action: kubecontainer.StartContainer, Target: "c", Error: kubecontainer.ErrImagePull, Message: "not found"}, wantReason: "ErrImagePull"},
		{desc: "crash loop keeps the last termination", policy: v1.RestartPolicyAlways,
			runtime:    []*kubecontainer.ContainerStatus{rtStatus("c", "1", kubecontainer.StateExited, 100, 1)},
			reason:     &kubecontainer.SyncResult{Action: kubecontainer.StartContainer, Target: "c", Error: kubecontainer.ErrCrashLoopBackOff, Message: "back-off 10s"},
			wantReason: "CrashLoopBackOff", wantLast: true},
		{desc: "no restart under Never: stays terminated", policy: v1.RestartPolicyNever,
			runtime: []*kubecontainer.ContainerStatus{rtStatus("c", "1", kubecontainer.StateExited, 100, 1)},
			reason:  &kubecontainer.SyncResult{Action: kubecontainer.StartContainer, Target: "c", Error: kubecontainer.ErrCrashLoopBackOff}},
		{desc: "created container is waiting", policy: v1.RestartPolicyAlways,
			runtime: []*kubecontainer.ContainerStatus{rtStatus("c", "1", kubecontainer.StateCreated, 100, 0)}, wantReason: ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			g := newGenerator(t)
			pod := staticPod("p", "uid-p", func(p *v1.Pod) { p.Spec.RestartPolicy = tc.policy })
			if tc.init {
				pod.Spec.InitContainers = []v1.Container{{Name: "i"}}
			}
			if tc.reason != nil {
				g.reasons.Update(pod.UID, kubecontainer.PodSyncResult{SyncResults: []*kubecontainer.SyncResult{tc.reason}})
			}
			s := g.Generate(pod, &kubecontainer.PodStatus{ID: pod.UID, ContainerStatuses: tc.runtime}, false)
			c := s.ContainerStatuses[0]
			if tc.wantReason == "" && tc.runtime != nil && tc.runtime[0].State == kubecontainer.StateExited {
				if c.State.Terminated == nil {
					t.Errorf("state = %+v, want terminated", c.State)
				}
				return
			}
			if c.State.Waiting == nil || c.State.Waiting.Reason != tc.wantReason {
				t.Fatalf("state = %+v, want waiting %q", c.State, tc.wantReason)
			}
			if tc.wantLast && (c.LastTerminationState.Terminated == nil || c.LastTerminationState.Terminated.ContainerID != "docker://1") {
				t.Errorf("last state = %+v", c.LastTerminationState)
			}
			if s.Phase != v1.PodPending && !tc.wantLast {
				t.Errorf("phase = %s", s.Phase)
			}
		})
	}
}

func TestInitContainerStatuses(t *testing.T) {
	t.Parallel()
	g := newGenerator(t)
	pod := staticPod("p", "uid-p", func(p *v1.Pod) {
		p.Spec.InitContainers = []v1.Container{{Name: "z-init"}, {Name: "a-init"}}
	})
	ps := &kubecontainer.PodStatus{ID: pod.UID, SandboxStatuses: readySandbox("10.1.0.5"), IPs: []string{"10.1.0.5"},
		ContainerStatuses: []*kubecontainer.ContainerStatus{
			rtStatus("z-init", "1", kubecontainer.StateExited, 100, 0),
			rtStatus("a-init", "2", kubecontainer.StateRunning, 200, 0),
		}}
	s := g.Generate(pod, ps, false)
	if len(s.InitContainerStatuses) != 2 || s.InitContainerStatuses[0].Name != "z-init" {
		t.Fatalf("init statuses = %+v, want spec order", s.InitContainerStatuses)
	}
	if s.InitContainerStatuses[0].State.Terminated == nil || !s.InitContainerStatuses[0].Ready {
		t.Error("completed init container not terminated and ready")
	}
	if s.ContainerStatuses[0].State.Waiting == nil || s.ContainerStatuses[0].State.Waiting.Reason != "PodInitializing" {
		t.Errorf("regular container = %+v", s.ContainerStatuses[0].State)
	}
	if s.Phase != v1.PodPending {
		t.Errorf("phase = %s", s.Phase)
	}
	for _, c := range s.Conditions {
		if c.Type == v1.PodInitialized && (c.Status != v1.ConditionFalse || c.Reason != status.ContainersNotInitialized) {
			t.Errorf("Initialized = %+v", c)
		}
	}
	// The init containers were removed after the regular container was created.
	ps2 := &kubecontainer.PodStatus{ID: pod.UID, ContainerStatuses: []*kubecontainer.ContainerStatus{rtStatus("c", "3", kubecontainer.StateRunning, 300, 0)}}
	s2 := newGenerator(t).Generate(pod, ps2, false)
	for _, ic := range s2.InitContainerStatuses {
		if ic.State.Terminated == nil || ic.State.Terminated.Reason != "Completed" {
			t.Errorf("%s = %+v, want Completed", ic.Name, ic.State)
		}
	}
}

func TestVanishedContainerAndTerminalPhaseKept(t *testing.T) {
	t.Parallel()
	g := newGenerator(t)
	pod := staticPod("p", "uid-p")
	ps := &kubecontainer.PodStatus{ID: pod.UID, ContainerStatuses: []*kubecontainer.ContainerStatus{rtStatus("c", "1", kubecontainer.StateRunning, 100, 0)}}
	g.status.(*status.Manager).SetPodStatus(pod, g.Generate(pod, ps, false))
	// the runtime lost the container
	s := g.Generate(pod, &kubecontainer.PodStatus{ID: pod.UID}, false)
	c := s.ContainerStatuses[0]
	lt := c.LastTerminationState.Terminated
	if lt == nil || lt.ExitCode != 137 || lt.Reason != status.ContainerReasonStatusUnknown || c.RestartCount != 2 {
		t.Errorf("vanished container = %+v", c)
	}
	if s.Phase != v1.PodRunning {
		t.Errorf("phase = %s, want Running (not back to Pending)", s.Phase)
	}
	// a terminal phase in the store sticks
	g.status.(*status.Manager).SetPodStatus(pod, v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "gone"})
	s = g.Generate(pod, ps, false)
	if s.Phase != v1.PodFailed || s.Reason != "Evicted" {
		t.Errorf("phase = %s (%s), want the stored Failed", s.Phase, s.Reason)
	}
}

func TestHostNetworkPodIP(t *testing.T) {
	t.Parallel()
	g := newGenerator(t)
	pod := staticPod("p", "uid-p", func(p *v1.Pod) { p.Spec.HostNetwork = true })
	s := g.Generate(pod, nil, false)
	if s.PodIP != "192.168.1.10" || len(s.PodIPs) != 1 {
		t.Errorf("host network pod IP = %q %v", s.PodIP, s.PodIPs)
	}
}

// evictAll says every pod must stop.
type evictAll struct{}

func (evictAll) ShouldEvict(*v1.Pod) (string, string, bool) {
	return "DeadlineExceeded", "too long", true
}

// TestEvictHandlerFailsPod: a handler that says the pod must stop makes the
// phase Failed with its reason and message, running containers or not.
func TestEvictHandlerFailsPod(t *testing.T) {
	t.Parallel()
	g, err := New(Options{Status: status.NewManager(status.Options{Logger: zaptest.NewLogger(t)}), Reasons: NewReasonCache(), Evict: []EvictHandler{evictAll{}}})
	if err != nil {
		t.Fatal(err)
	}
	pod := staticPod("p", "uid-p")
	ps := &kubecontainer.PodStatus{ID: pod.UID, ContainerStatuses: []*kubecontainer.ContainerStatus{rtStatus("c", "1", kubecontainer.StateRunning, 100, 0)}}
	s := g.Generate(pod, ps, false)
	if s.Phase != v1.PodFailed || s.Reason != "DeadlineExceeded" || s.Message != "too long" {
		t.Errorf("status = %s / %q / %q, want Failed / DeadlineExceeded / too long", s.Phase, s.Reason, s.Message)
	}
}

// TestEphemeralContainerStatuses: an ephemeral container not created yet
// waits (it is not taken for a completed init container), a running one
// shows running; the phase does not depend on it.
func TestEphemeralContainerStatuses(t *testing.T) {
	t.Parallel()
	g := newGenerator(t)
	pod := staticPod("p", "uid-p", func(p *v1.Pod) {
		p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}, TargetContainerName: "c"}}
	})
	ps := &kubecontainer.PodStatus{ID: pod.UID, SandboxStatuses: readySandbox("10.1.0.5"),
		ContainerStatuses: []*kubecontainer.ContainerStatus{rtStatus("c", "1", kubecontainer.StateRunning, 100, 0)}}
	s := g.Generate(pod, ps, false)
	if len(s.EphemeralContainerStatuses) != 1 || s.EphemeralContainerStatuses[0].State.Waiting == nil {
		t.Fatalf("not yet created ephemeral container: %+v", s.EphemeralContainerStatuses)
	}
	ps.ContainerStatuses = append(ps.ContainerStatuses, rtStatus("debug", "2", kubecontainer.StateRunning, 200, 0))
	s = g.Generate(pod, ps, false)
	if es := s.EphemeralContainerStatuses; len(es) != 1 || es[0].State.Running == nil || es[0].ContainerID != "docker://2" {
		t.Errorf("running ephemeral container: %+v", es)
	}
	if s.Phase != v1.PodRunning || len(s.ContainerStatuses) != 1 {
		t.Errorf("phase %s, %d container statuses; want Running and the one regular container", s.Phase, len(s.ContainerStatuses))
	}
}
