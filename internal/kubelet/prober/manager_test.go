package prober

import (
	"context"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// fastProbe is an exec probe ticking every 5ms (test "seconds" are milliseconds).
func fastProbe(mutate func(p *v1.Probe)) *v1.Probe {
	return execProbe(func(p *v1.Probe) {
		p.PeriodSeconds = 5
		if mutate != nil {
			mutate(p)
		}
	})
}

func workerKeys(m *Manager) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for k := range m.workers {
		out = append(out, string(k.podUID)+"/"+k.container+"/"+k.probeType.String())
	}
	sort.Strings(out)
	return out
}

// waitWorkers waits for every worker goroutine to return.
func waitWorkers(t *testing.T, m *Manager) {
	t.Helper()
	done := make(chan struct{})
	go func() { m.wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatalf("workers still running: %v", workerKeys(m))
	}
}

func multiProbePod(uid string) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	pod := testPod(uid,
		v1.Container{Name: "a", LivenessProbe: fastProbe(nil), ReadinessProbe: fastProbe(nil)},
		v1.Container{Name: "b", StartupProbe: fastProbe(nil)},
		v1.Container{Name: "none"},
	)
	pod.Spec.InitContainers = []v1.Container{
		{Name: "init", LivenessProbe: fastProbe(nil)}, // plain init containers are not probed
		{Name: "sidecar", RestartPolicy: &always, ReadinessProbe: fastProbe(nil)},
	}
	return pod
}

func TestManagerAddPodStartsWorkers(t *testing.T) {
	t.Parallel()
	status := newFakeStatus()
	p := newFakeProber(Success)
	m := newTestManager(t, status, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); waitWorkers(t, m) }()

	pod := multiProbePod("u1")
	m.AddPod(ctx, pod)
	m.AddPod(ctx, pod) // idempotent
	want := []string{"u1/a/Liveness", "u1/a/Readiness", "u1/b/Startup", "u1/sidecar/Readiness"}
	if got := workerKeys(m); !equalStrings(got, want) {
		t.Fatalf("workers = %v, want %v", got, want)
	}

	// Every worker probes once its container runs.
	st := runningStatus("a", "docker://a", time.Hour, boolPtr(true))
	st.ContainerStatuses = append(st.ContainerStatuses, runningStatus("b", "docker://b", time.Hour, boolPtr(false)).ContainerStatuses...)
	sidecar := runningStatus("sidecar", "docker://s", time.Hour, boolPtr(true)).ContainerStatuses
	st.InitContainerStatuses = sidecar
	status.set(pod.UID, st)
	eventually(t, "every probe type to run", func() bool {
		return p.count(Liveness) > 0 && p.count(Readiness) > 1 && p.count(Startup) > 0
	})
	u := recvFor(t, m.ReadinessUpdates(), kubecontainer.ContainerID{Type: "docker", ID: "s"}, Success)
	if u.PodUID != pod.UID {
		t.Errorf("update pod UID = %q", u.PodUID)
	}
}

// recvFor waits for an update of the container with the given result.
func recvFor(t *testing.T, ch <-chan Update, id kubecontainer.ContainerID, r Result) Update {
	t.Helper()
	deadline := time.After(2 * time.Second)
	for {
		select {
		case u := <-ch:
			if u.ContainerID == id && u.Result == r {
				return u
			}
		case <-deadline:
			t.Fatalf("no %v update for %v", r, id)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestManagerRemoveAndCleanup(t *testing.T) {
	t.Parallel()
	status := newFakeStatus()
	m := newTestManager(t, status, newFakeProber(Success))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	p1, p2, p3 := multiProbePod("u1"), multiProbePod("u2"), multiProbePod("u3")
	for _, p := range []*v1.Pod{p1, p2, p3} {
		status.set(p.UID, runningStatus("a", "docker://"+string(p.UID), time.Hour, boolPtr(true)))
		m.AddPod(ctx, p)
	}
	id1 := kubecontainer.ContainerID{Type: "docker", ID: "u1"}
	eventually(t, "a readiness result for u1", func() bool { _, ok := m.Result(Readiness, id1); return ok })

	m.RemovePod(p1)
	m.CleanupPods(map[k8stypes.UID]struct{}{"u3": {}})
	want := []string{"u3/a/Liveness", "u3/a/Readiness", "u3/b/Startup", "u3/sidecar/Readiness"}
	if got := workerKeys(m); !equalStrings(got, want) {
		t.Fatalf("workers = %v, want %v", got, want)
	}
	eventually(t, "u1's results to be dropped", func() bool { _, ok := m.Result(Readiness, id1); return !ok })

	// A removed pod can be added again.
	m.AddPod(ctx, p1)
	if got := len(workerKeys(m)); got != 8 {
		t.Fatalf("%d workers after re-adding, want 8", got)
	}
	m.CleanupPods(nil)
	if got := workerKeys(m); len(got) != 0 {
		t.Fatalf("workers after CleanupPods(nil) = %v", got)
	}
	waitWorkers(t, m)
}

func TestManagerStopsWorkersWithCtx(t *testing.T) {
	t.Parallel()
	status := newFakeStatus()
	m := newTestManager(t, status, newFakeProber(Success))
	ctx, cancel := context.WithCancel(context.Background())
	m.AddPod(ctx, multiProbePod("u1"))
	cancel()
	waitWorkers(t, m)
	if got := workerKeys(m); len(got) != 0 {
		t.Fatalf("workers after ctx end = %v", got)
	}
	// The next AddPod starts them again.
	ctx2, cancel2 := context.WithCancel(context.Background())
	m.AddPod(ctx2, multiProbePod("u1"))
	if got := len(workerKeys(m)); got != 4 {
		t.Fatalf("%d workers after AddPod, want 4", got)
	}
	cancel2()
	waitWorkers(t, m)
}

func TestManagerStartupGatesOtherProbes(t *testing.T) {
	t.Parallel()
	status := newFakeStatus()
	p := newFakeProber(Success)
	p.byType = map[ProbeType][]Result{Startup: {Failure, Failure, Failure, Success}}
	m := newTestManager(t, status, p)
	// Like the kubelet: the stored status always went through UpdatePodStatus.
	status.onGet = m.UpdatePodStatus
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); waitWorkers(t, m) }()

	pod := testPod("u1", v1.Container{
		Name:           "c",
		StartupProbe:   fastProbe(func(p *v1.Probe) { p.FailureThreshold = 10 }),
		LivenessProbe:  fastProbe(nil),
		ReadinessProbe: fastProbe(nil),
	})
	status.set(pod.UID, runningStatus("c", testCID, time.Hour, nil))
	m.AddPod(ctx, pod)

	id := kubecontainer.ContainerID{Type: "docker", ID: "c1"}
	recvFor(t, m.StartupUpdates(), id, Success)
	recvFor(t, m.ReadinessUpdates(), id, Success)
	eventually(t, "liveness probes", func() bool { return p.count(Liveness) > 0 })

	calls := p.callLog()
	lastStartup, firstOther := -1, len(calls)
	for i, c := range calls {
		if c == Startup {
			lastStartup = i
		} else if i < firstOther {
			firstOther = i
		}
	}
	if lastStartup != 3 || firstOther < lastStartup {
		t.Fatalf("call order %v: startup must succeed (4 calls) before any other probe", calls)
	}
	st, _ := status.GetPodStatus(pod.UID)
	if c := st.ContainerStatuses[0]; c.Started == nil || !*c.Started || !c.Ready {
		t.Fatalf("status started=%v ready=%v, want both true", c.Started, c.Ready)
	}
}

func TestManagerLivenessFailureAndRestart(t *testing.T) {
	t.Parallel()
	status := newFakeStatus()
	p := newFakeProber(Failure)
	m := newTestManager(t, status, p)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); waitWorkers(t, m) }()

	pod := testPod("u1", v1.Container{Name: "c", LivenessProbe: fastProbe(func(p *v1.Probe) { p.FailureThreshold = 2 })})
	status.set(pod.UID, runningStatus("c", testCID, time.Hour, boolPtr(true)))
	m.AddPod(ctx, pod)

	old := kubecontainer.ContainerID{Type: "docker", ID: "c1"}
	if u := recv(t, m.LivenessUpdates()); u.ContainerID != old || u.Result != Success || u.PodUID != pod.UID {
		t.Fatalf("first update = %+v, want the initial Success", u)
	}
	if u := recv(t, m.LivenessUpdates()); u.ContainerID != old || u.Result != Failure {
		t.Fatalf("second update = %+v, want Failure", u)
	}
	// On hold: no more probes of the failed container.
	calls := p.count(Liveness)
	time.Sleep(30 * time.Millisecond)
	if got := p.count(Liveness); got != calls {
		t.Fatalf("probed the failed container again (%d -> %d)", calls, got)
	}
	noUpdate(t, m.LivenessUpdates())

	// The kubelet restarted it; the new container is healthy.
	p.mu.Lock()
	p.results = []Result{Success}
	p.mu.Unlock()
	status.set(pod.UID, runningStatus("c", "docker://c2", time.Hour, boolPtr(true)))
	recvFor(t, m.LivenessUpdates(), kubecontainer.ContainerID{Type: "docker", ID: "c2"}, Success)
	eventually(t, "probes of the new container", func() bool { return p.count(Liveness) > calls })
	if _, ok := m.Result(Liveness, old); ok {
		t.Error("the old container's result is still cached")
	}
}

func TestUpdatePodStatus(t *testing.T) {
	t.Parallel()
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.Now()}}
	waiting := v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	exited0 := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}
	exited1 := v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}
	always := v1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		desc        string
		container   v1.Container
		initC       bool
		state       v1.ContainerState
		startup     *Result // cached startup result
		readiness   *Result // cached readiness result
		wantStarted bool
		wantReady   bool
		wantTrigger bool
	}{
		{desc: "no probes, running", container: v1.Container{}, state: running, wantStarted: true, wantReady: true},
		{desc: "no probes, waiting", container: v1.Container{}, state: waiting},
		{desc: "no probes, exited", container: v1.Container{}, state: exited0},
		{desc: "readiness without a result", container: v1.Container{ReadinessProbe: execProbe(nil)}, state: running, wantStarted: true, wantTrigger: true},
		{desc: "readiness success", container: v1.Container{ReadinessProbe: execProbe(nil)}, state: running, readiness: ptr(Success), wantStarted: true, wantReady: true},
		{desc: "readiness failure", container: v1.Container{ReadinessProbe: execProbe(nil)}, state: running, readiness: ptr(Failure), wantStarted: true, wantTrigger: true},
		{desc: "readiness success but not running", container: v1.Container{ReadinessProbe: execProbe(nil)}, state: exited0, readiness: ptr(Success)},
		{desc: "startup without a result", container: v1.Container{StartupProbe: execProbe(nil)}, state: running},
		{desc: "startup unknown", container: v1.Container{StartupProbe: execProbe(nil)}, state: running, startup: ptr(Unknown)},
		{desc: "startup failure", container: v1.Container{StartupProbe: execProbe(nil)}, state: running, startup: ptr(Failure)},
		{desc: "startup success, no readiness probe", container: v1.Container{StartupProbe: execProbe(nil)}, state: running, startup: ptr(Success), wantStarted: true, wantReady: true},
		{
			desc: "not started hides a readiness success", container: v1.Container{StartupProbe: execProbe(nil), ReadinessProbe: execProbe(nil)},
			state: running, readiness: ptr(Success),
		},
		{desc: "init container exited 0", initC: true, container: v1.Container{}, state: exited0, wantReady: true},
		{desc: "init container exited 1", initC: true, container: v1.Container{}, state: exited1},
		{desc: "init container running", initC: true, container: v1.Container{}, state: running, wantStarted: true},
		{desc: "sidecar running without probes", initC: true, container: v1.Container{RestartPolicy: &always}, state: running, wantStarted: true, wantReady: true},
		{
			desc: "sidecar with readiness, no result", initC: true, container: v1.Container{RestartPolicy: &always, ReadinessProbe: execProbe(nil)},
			state: running, wantStarted: true, wantTrigger: true,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			m := newTestManager(t, newFakeStatus(), newFakeProber(Success))
			c := tc.container
			c.Name = "c"
			pod := testPod("u1")
			if tc.initC {
				pod.Spec.InitContainers = []v1.Container{c}
			} else {
				pod.Spec.Containers = []v1.Container{c}
			}
			// Register the workers without running them, as AddPod would.
			m.pods[pod.UID] = pod
			for _, pt := range []ProbeType{Startup, Readiness, Liveness} {
				if probeSpec(pt, &c) != nil {
					w := newWorker(m, pt, pod, c)
					m.workers[w.key()] = w
				}
			}
			id := kubecontainer.ContainerID{Type: "docker", ID: "c1"}
			if tc.startup != nil {
				m.startup.store(id, *tc.startup)
			}
			if tc.readiness != nil {
				m.readiness.store(id, *tc.readiness)
			}
			cs := []v1.ContainerStatus{{Name: "c", ContainerID: id.String(), State: tc.state, Ready: true}}
			status := &v1.PodStatus{}
			if tc.initC {
				status.InitContainerStatuses = cs
			} else {
				status.ContainerStatuses = cs
			}

			m.UpdatePodStatus(pod.UID, status)

			got := cs[0]
			if got.Started == nil || *got.Started != tc.wantStarted || got.Ready != tc.wantReady {
				t.Errorf("started=%v ready=%v; want %v %v", deref(got.Started), got.Ready, tc.wantStarted, tc.wantReady)
			}
			triggered := false
			if w, ok := m.workers[probeKey{podUID: pod.UID, container: "c", probeType: Readiness}]; ok {
				triggered = len(w.manual) == 1
			}
			if triggered != tc.wantTrigger {
				t.Errorf("readiness triggered = %v, want %v", triggered, tc.wantTrigger)
			}
		})
	}
}

func deref(b *bool) any {
	if b == nil {
		return nil
	}
	return *b
}

func TestProbeResultsAdapter(t *testing.T) {
	m := NewManager(Options{})
	id := kubecontainer.ContainerID{Type: "docker", ID: "abc"}
	if m.LivenessFailed(id) || m.StartupFailed(id) || m.StartupSucceeded(id) {
		t.Fatal("results reported for an unknown container")
	}
	m.liveness.store(id, Failure)
	m.startup.store(id, Success)
	if !m.LivenessFailed(id) || m.StartupFailed(id) || !m.StartupSucceeded(id) {
		t.Fatal("adapter does not reflect the results")
	}
}
