package prober

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

const testCID = "docker://c1"

// workerFixture is one worker driven step by step through doProbe.
type workerFixture struct {
	m      *Manager
	w      *worker
	status *fakeStatus
	prober *fakeProber
	pod    *v1.Pod
}

func newWorkerFixture(t *testing.T, pt ProbeType, probe *v1.Probe, results ...Result) *workerFixture {
	t.Helper()
	c := v1.Container{Name: "c"}
	switch pt {
	case Liveness:
		c.LivenessProbe = probe
	case Readiness:
		c.ReadinessProbe = probe
	case Startup:
		c.StartupProbe = probe
	}
	if len(results) == 0 {
		results = []Result{Success}
	}
	f := &workerFixture{status: newFakeStatus(), prober: newFakeProber(results...), pod: testPod("u1", c)}
	f.m = newTestManager(t, f.status, f.prober)
	f.w = newWorker(f.m, pt, f.pod, c)
	// Started matches what the kubelet would report for the probe under test.
	f.setStatus(runningStatus("c", testCID, time.Hour, boolPtr(pt != Startup)))
	return f
}

func (f *workerFixture) setStatus(s v1.PodStatus) { f.status.set(f.pod.UID, s) }

func (f *workerFixture) step(t *testing.T) bool {
	t.Helper()
	return f.w.doProbe(context.Background())
}

func (f *workerFixture) cached(id string) (Result, bool) {
	cid, _ := kubecontainer.ParseContainerID(id)
	return f.w.results.get(cid)
}

// drain returns every pending update of the worker's probe type.
func (f *workerFixture) drain() []Result {
	var out []Result
	for {
		select {
		case u := <-f.w.results.updates:
			out = append(out, u.Result)
		default:
			return out
		}
	}
}

func TestWorkerThresholds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc        string
		probeType   ProbeType
		success     int32
		failure     int32
		results     []Result
		wantCached  []Result // after each step
		wantUpdates []Result // all updates, in order: only changes
		wantCalls   int
	}{
		{
			desc: "readiness: default thresholds", probeType: Readiness, success: 1, failure: 3,
			results:     []Result{Success, Failure, Failure, Failure, Success},
			wantCached:  []Result{Success, Success, Success, Failure, Success},
			wantUpdates: []Result{Failure, Success, Failure, Success},
			wantCalls:   5,
		},
		{
			desc: "readiness: successThreshold 2", probeType: Readiness, success: 2, failure: 3,
			results:     []Result{Success, Success, Failure, Success, Success},
			wantCached:  []Result{Failure, Success, Success, Success, Success},
			wantUpdates: []Result{Failure, Success},
			wantCalls:   5,
		},
		{
			desc: "readiness: repeated results publish nothing", probeType: Readiness, success: 1, failure: 1,
			results:     []Result{Success, Success, Success, Success},
			wantCached:  []Result{Success, Success, Success, Success},
			wantUpdates: []Result{Failure, Success},
			wantCalls:   4,
		},
		{
			desc: "liveness: failureThreshold 2 then on hold", probeType: Liveness, success: 1, failure: 2,
			results:     []Result{Success, Failure, Failure, Success, Success},
			wantCached:  []Result{Success, Success, Failure, Failure, Failure},
			wantUpdates: []Result{Success, Failure},
			wantCalls:   3,
		},
		{
			desc: "liveness: a success in between resets the failure run", probeType: Liveness, success: 1, failure: 2,
			results:     []Result{Failure, Success, Failure, Success},
			wantCached:  []Result{Success, Success, Success, Success},
			wantUpdates: []Result{Success},
			wantCalls:   4,
		},
		{
			desc: "startup: initial Unknown, success", probeType: Startup, success: 1, failure: 3,
			results:     []Result{Failure, Success},
			wantCached:  []Result{Unknown, Success},
			wantUpdates: []Result{Unknown, Success},
			wantCalls:   2,
		},
		{
			desc: "startup: failureThreshold reached, then on hold", probeType: Startup, success: 1, failure: 2,
			results:     []Result{Failure, Failure, Success},
			wantCached:  []Result{Unknown, Failure, Failure},
			wantUpdates: []Result{Unknown, Failure},
			wantCalls:   2,
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			f := newWorkerFixture(t, tc.probeType, execProbe(func(p *v1.Probe) {
				p.SuccessThreshold, p.FailureThreshold = tc.success, tc.failure
			}), tc.results...)
			var updates, cached []Result
			for range tc.wantCached {
				if !f.step(t) {
					t.Fatal("worker stopped")
				}
				r, ok := f.cached(testCID)
				if !ok {
					t.Fatal("no cached result")
				}
				cached = append(cached, r)
				updates = append(updates, f.drain()...)
			}
			if !reflect.DeepEqual(cached, tc.wantCached) {
				t.Errorf("cached = %v, want %v", cached, tc.wantCached)
			}
			if !reflect.DeepEqual(updates, tc.wantUpdates) {
				t.Errorf("updates = %v, want %v", updates, tc.wantUpdates)
			}
			if got := f.prober.count(tc.probeType); got != tc.wantCalls {
				t.Errorf("probe calls = %d, want %d", got, tc.wantCalls)
			}
		})
	}
}

func TestWorkerStartupGating(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc      string
		probeType ProbeType
		started   *bool
		wantCalls int
	}{
		{desc: "liveness waits for started", probeType: Liveness, started: boolPtr(false), wantCalls: 0},
		{desc: "liveness waits while Started is unset", probeType: Liveness, started: nil, wantCalls: 0},
		{desc: "liveness runs once started", probeType: Liveness, started: boolPtr(true), wantCalls: 1},
		{desc: "readiness waits for started", probeType: Readiness, started: boolPtr(false), wantCalls: 0},
		{desc: "readiness runs once started", probeType: Readiness, started: boolPtr(true), wantCalls: 1},
		{desc: "startup runs before started", probeType: Startup, started: boolPtr(false), wantCalls: 1},
		{desc: "startup stops once started", probeType: Startup, started: boolPtr(true), wantCalls: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			f := newWorkerFixture(t, tc.probeType, execProbe(nil))
			f.setStatus(runningStatus("c", testCID, time.Hour, tc.started))
			if !f.step(t) {
				t.Fatal("worker stopped")
			}
			if got := f.prober.count(tc.probeType); got != tc.wantCalls {
				t.Errorf("probe calls = %d, want %d", got, tc.wantCalls)
			}
		})
	}
}

func TestWorkerInitialDelay(t *testing.T) {
	t.Parallel()
	// The fixture's "second" is a millisecond: 1000 units is one second.
	f := newWorkerFixture(t, Readiness, execProbe(func(p *v1.Probe) { p.InitialDelaySeconds = 1000 }))
	f.setStatus(runningStatus("c", testCID, 0, boolPtr(true)))
	f.step(t)
	if got := f.prober.count(Readiness); got != 0 {
		t.Fatalf("probed %d times during the initial delay", got)
	}
	if r, _ := f.cached(testCID); r != Failure {
		t.Fatalf("readiness during the initial delay = %v, want Failure", r)
	}
	f.setStatus(runningStatus("c", testCID, 2*time.Second, boolPtr(true)))
	f.step(t)
	if got := f.prober.count(Readiness); got != 1 {
		t.Fatalf("probed %d times after the initial delay, want 1", got)
	}
	if r, _ := f.cached(testCID); r != Success {
		t.Fatalf("readiness after the delay = %v, want Success", r)
	}
}

func TestWorkerContainerRestartResets(t *testing.T) {
	t.Parallel()
	f := newWorkerFixture(t, Liveness, execProbe(func(p *v1.Probe) { p.FailureThreshold = 2 }),
		Failure, Failure, Failure, Success)
	f.step(t)
	f.step(t)
	if r, _ := f.cached(testCID); r != Failure {
		t.Fatalf("liveness = %v, want Failure", r)
	}
	// On hold: the failed container is not probed again.
	f.step(t)
	if got := f.prober.count(Liveness); got != 2 {
		t.Fatalf("probe calls while on hold = %d, want 2", got)
	}
	if got := f.drain(); !reflect.DeepEqual(got, []Result{Success, Failure}) {
		t.Fatalf("updates = %v", got)
	}

	// The kubelet restarted the container: a new ID resets everything.
	const newID = "docker://c2"
	f.setStatus(runningStatus("c", newID, time.Hour, boolPtr(true)))
	f.step(t) // one Failure: below the threshold of 2, the run starts over
	if _, ok := f.cached(testCID); ok {
		t.Error("the old container's result is still cached")
	}
	if r, _ := f.cached(newID); r != Success {
		t.Fatalf("new container liveness = %v, want the initial Success", r)
	}
	f.step(t) // Success
	if got := f.prober.count(Liveness); got != 4 {
		t.Errorf("probe calls = %d, want 4", got)
	}
	if got := f.drain(); !reflect.DeepEqual(got, []Result{Success}) {
		t.Errorf("updates after restart = %v, want [Success]", got)
	}
}

func TestWorkerStops(t *testing.T) {
	t.Parallel()
	exited := func() v1.PodStatus {
		return v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
			Name: "c", ContainerID: testCID,
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}},
		}}}
	}
	for _, tc := range []struct {
		desc       string
		status     *v1.PodStatus
		policy     v1.RestartPolicy
		deleting   bool
		want       bool
		wantResult Result
		wantCached bool
	}{
		{desc: "no status yet", want: true},
		{desc: "pod succeeded", status: &v1.PodStatus{Phase: v1.PodSucceeded}, want: false},
		{desc: "pod failed", status: &v1.PodStatus{Phase: v1.PodFailed}, want: false},
		{desc: "container not created yet", status: &v1.PodStatus{Phase: v1.PodPending, ContainerStatuses: []v1.ContainerStatus{{Name: "c"}}}, want: true},
		{desc: "exited, will restart", status: ptr(exited()), policy: v1.RestartPolicyAlways, want: true, wantResult: Failure, wantCached: true},
		{desc: "exited for good", status: ptr(exited()), policy: v1.RestartPolicyNever, want: false, wantResult: Failure, wantCached: true},
		{desc: "pod deletion: liveness quietly succeeds", status: ptr(runningStatus("c", testCID, time.Hour, boolPtr(true))), deleting: true, want: false, wantResult: Success, wantCached: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			f := newWorkerFixture(t, Liveness, execProbe(nil), Failure)
			f.status.statuses = map[k8stypes.UID]v1.PodStatus{}
			if tc.status != nil {
				f.setStatus(*tc.status)
			}
			f.pod.Spec.RestartPolicy = tc.policy
			if tc.deleting {
				now := metav1.Now()
				f.pod.DeletionTimestamp = &now
			}
			if got := f.step(t); got != tc.want {
				t.Errorf("keepGoing = %v, want %v", got, tc.want)
			}
			r, ok := f.cached(testCID)
			if ok != tc.wantCached || r != tc.wantResult {
				t.Errorf("cached = %v, %v; want %v, %v", r, ok, tc.wantResult, tc.wantCached)
			}
			if got := f.prober.count(Liveness); got != 0 {
				t.Errorf("probe calls = %d, want 0", got)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestWorkerIgnoresProbeErrors(t *testing.T) {
	t.Parallel()
	f := newWorkerFixture(t, Readiness, execProbe(func(p *v1.Probe) { p.FailureThreshold = 1 }))
	f.prober.err = errors.New("runtime hiccup")
	for range 3 {
		if !f.step(t) {
			t.Fatal("worker stopped")
		}
	}
	if r, _ := f.cached(testCID); r != Failure {
		t.Fatalf("readiness = %v, want the initial Failure", r)
	}
	if got := f.drain(); !reflect.DeepEqual(got, []Result{Failure}) {
		t.Fatalf("updates = %v, want only the initial one", got)
	}
	f.prober.mu.Lock()
	f.prober.err = nil
	f.prober.mu.Unlock()
	f.step(t)
	if r, _ := f.cached(testCID); r != Success {
		t.Fatalf("readiness = %v, want Success", r)
	}
}
