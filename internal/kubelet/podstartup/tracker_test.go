package podstartup

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

var t0 = time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)

func newTracker(t *testing.T) (*Tracker, *clocktesting.FakeClock, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	clk := clocktesting.NewFakeClock(t0)
	tr, err := New(Options{Registerer: reg, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return tr, clk, reg
}

// apiPod is a pod created at t0 with one container, not started yet.
func apiPod(uid string, mutate ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: k8stypes.UID(uid), Name: uid, Namespace: "ns", CreationTimestamp: metav1.NewTime(t0)}}
	p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{}}}}
	for _, m := range mutate {
		m(p)
	}
	return p
}

// started returns a copy of p with its containers running since at.
func started(p *v1.Pod, at time.Time) *v1.Pod {
	c := p.DeepCopy()
	st := metav1.NewTime(at)
	c.Status.StartTime = &st
	c.Status.Phase = v1.PodRunning
	for i := range c.Status.ContainerStatuses {
		c.Status.ContainerStatuses[i].State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: st}}
	}
	return c
}

// sums returns the sample sum and count of a histogram (0, 0 when unserved).
func sums(t *testing.T, reg *prometheus.Registry, name string) (sum float64, count uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetHistogram().GetSampleSum()
				count += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return sum, count
}

// TestTrackerSLI: created at t0, 3 s of pulls (two overlapping: 2 s + 1 s
// past it) and 1 s of init container; the kubelet patches the status at
// t0+10s and sees it on the watch at t0+11s: total 11 s, SLI 11-3-1 = 7 s.
func TestTrackerSLI(t *testing.T) {
	t.Parallel()
	tr, clk, reg := newTracker(t)
	p := apiPod("a", func(p *v1.Pod) {
		p.Spec.Volumes = []v1.Volume{{Name: "e", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	})
	tr.ObservedPodsOnWatch([]*v1.Pod{p}, t0)

	clk.SetTime(t0.Add(time.Second))
	tr.RecordImageStartedPulling("a")
	clk.SetTime(t0.Add(2 * time.Second))
	tr.RecordImageStartedPulling("a")
	clk.SetTime(t0.Add(3 * time.Second))
	tr.RecordImageFinishedPulling("a") // 1s..3s
	clk.SetTime(t0.Add(4 * time.Second))
	tr.RecordImageFinishedPulling("a") // 2s..4s: 1 s past the first
	tr.RecordImageFinishedPulling("a") // no pull running: nothing
	tr.RecordInitContainerStarted("a", t0.Add(5*time.Second))
	tr.RecordInitContainerFinished("a", t0.Add(6*time.Second))
	tr.RecordInitContainerFinished("a", t0.Add(9*time.Second)) // no init container running: nothing

	// Seen running on the watch before the kubelet's own patch: not yet.
	tr.ObservedPodsOnWatch([]*v1.Pod{started(p, t0.Add(7*time.Second))}, t0.Add(8*time.Second))
	if _, n := sums(t, reg, "kubelet_pod_start_sli_duration_seconds"); n != 0 {
		t.Fatalf("recorded before the status patch: %d samples", n)
	}
	clk.SetTime(t0.Add(10 * time.Second))
	tr.RecordStatusUpdated(started(p, t0.Add(7*time.Second)))
	tr.ObservedPodsOnWatch([]*v1.Pod{started(p, t0.Add(7*time.Second))}, t0.Add(11*time.Second))
	tr.ObservedPodsOnWatch([]*v1.Pod{started(p, t0.Add(7*time.Second))}, t0.Add(12*time.Second)) // once only

	if sum, n := sums(t, reg, "kubelet_pod_start_sli_duration_seconds"); n != 1 || sum != 7 {
		t.Errorf("SLI sum %v count %d, want 7 s once", sum, n)
	}
	if sum, n := sums(t, reg, "kubelet_pod_start_total_duration_seconds"); n != 1 || sum != 11 {
		t.Errorf("total sum %v count %d, want 11 s once", sum, n)
	}
	if v := testutil.ToFloat64(tr.firstNetwork); v != 7 {
		t.Errorf("first network pod SLI = %v, want 7", v)
	}
}

// TestTrackerLeavesOut: pods the SLI does not count.
func TestTrackerLeavesOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc             string
		pod              *v1.Pod
		wantSLI, wantAll uint64
	}{
		{"already started when first seen", started(apiPod("a"), t0), 0, 0},
		{"unschedulable", apiPod("a", func(p *v1.Pod) {
			p.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionFalse}}
		}), 0, 0},
		{"stateful: total only", apiPod("a", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/d"}}}}
		}), 0, 1},
		{"stateless", apiPod("a"), 1, 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			tr, _, reg := newTracker(t)
			tr.ObservedPodsOnWatch([]*v1.Pod{tc.pod}, t0)
			run := started(tc.pod, t0.Add(time.Second))
			run.Status.Conditions = nil
			tr.RecordStatusUpdated(run)
			tr.ObservedPodsOnWatch([]*v1.Pod{run}, t0.Add(2*time.Second))
			if _, n := sums(t, reg, "kubelet_pod_start_sli_duration_seconds"); n != tc.wantSLI {
				t.Errorf("SLI samples %d, want %d", n, tc.wantSLI)
			}
			if _, n := sums(t, reg, "kubelet_pod_start_total_duration_seconds"); n != tc.wantAll {
				t.Errorf("total samples %d, want %d", n, tc.wantAll)
			}
		})
	}
}

// TestTrackerForgets: a pod missing from an update, or terminal, is no
// longer tracked; a nil tracker records nothing.
func TestTrackerForgets(t *testing.T) {
	t.Parallel()
	tr, _, reg := newTracker(t)
	a, b := apiPod("a"), apiPod("b")
	tr.ObservedPodsOnWatch([]*v1.Pod{a, b}, t0)
	failed := b.DeepCopy()
	failed.Status.Phase = v1.PodFailed
	tr.ObservedPodsOnWatch([]*v1.Pod{failed}, t0) // a gone, b terminal
	tr.mu.Lock()
	n := len(tr.pods)
	tr.mu.Unlock()
	if n != 0 {
		t.Errorf("%d pods still tracked, want 0", n)
	}
	var none *Tracker
	none.ObservedPodsOnWatch([]*v1.Pod{a}, t0)
	none.RecordImageStartedPulling("a")
	none.RecordStatusUpdated(a)
	if _, n := sums(t, reg, "kubelet_pod_start_sli_duration_seconds"); n != 0 || testutil.CollectAndCount(tr.sli) != 0 {
		t.Error("SLI served before any pod started")
	}
}
