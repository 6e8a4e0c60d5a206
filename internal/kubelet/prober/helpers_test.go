package prober

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// fakeRunner answers RunInContainer with fixed output and error, or blocks until the
// ctx ends when block is set.
type fakeRunner struct {
	mu     sync.Mutex
	out    []byte
	err    error
	block  bool
	calls  int
	cmd    []string
	id     kubecontainer.ContainerID
	tmo    time.Duration
	hasDDL bool
}

func (f *fakeRunner) RunInContainer(ctx context.Context, id kubecontainer.ContainerID, cmd []string, timeout time.Duration) ([]byte, error) {
	f.mu.Lock()
	f.calls++
	f.cmd, f.id, f.tmo = cmd, id, timeout
	_, f.hasDDL = ctx.Deadline()
	out, err, block := f.out, f.err, f.block
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return out, err
}

// fakeStatus is a StatusProvider over a map; when onGet is set it runs on a copy of the
// status before returning it (the kubelet's UpdatePodStatus on every status).
type fakeStatus struct {
	mu       sync.Mutex
	statuses map[k8stypes.UID]v1.PodStatus
	onGet    func(uid k8stypes.UID, s *v1.PodStatus)
}

func newFakeStatus() *fakeStatus {
	return &fakeStatus{statuses: make(map[k8stypes.UID]v1.PodStatus)}
}

func (f *fakeStatus) GetPodStatus(uid k8stypes.UID) (v1.PodStatus, bool) {
	f.mu.Lock()
	s, ok := f.statuses[uid]
	onGet := f.onGet
	f.mu.Unlock()
	if ok {
		s = *s.DeepCopy()
		if onGet != nil {
			onGet(uid, &s)
		}
	}
	return s, ok
}

func (f *fakeStatus) set(uid k8stypes.UID, s v1.PodStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses[uid] = s
}

// fakeProber returns scripted results: each call pops the next one, the last repeats.
type fakeProber struct {
	mu      sync.Mutex
	results []Result
	byType  map[ProbeType][]Result // overrides results for a type
	err     error
	calls   map[ProbeType]int
	log     []ProbeType
}

func newFakeProber(results ...Result) *fakeProber {
	return &fakeProber{results: results, calls: make(map[ProbeType]int)}
}

func (f *fakeProber) probe(_ context.Context, t ProbeType, _ *v1.Pod, _ *v1.PodStatus, _ *v1.Container, _ kubecontainer.ContainerID) (Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[t]++
	f.log = append(f.log, t)
	if f.err != nil {
		return Failure, f.err
	}
	list := &f.results
	if rs, ok := f.byType[t]; ok {
		list = &rs
		defer func() { f.byType[t] = rs }()
	}
	r := (*list)[0]
	if len(*list) > 1 {
		*list = (*list)[1:]
	}
	return r, nil
}

func (f *fakeProber) callLog() []ProbeType {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]ProbeType(nil), f.log...)
}

func (f *fakeProber) count(t ProbeType) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[t]
}

// newTestManager builds a Manager with millisecond "seconds", no start-up jitter and
// the given fake prober (nil keeps the real one).
func newTestManager(t *testing.T, status StatusProvider, p podProber) *Manager {
	t.Helper()
	m := NewManager(Options{Status: status, Logger: zaptest.NewLogger(t)})
	m.second = time.Millisecond
	m.start = time.Time{}
	if p != nil {
		m.prober = p
	}
	return m
}

func boolPtr(b bool) *bool { return &b }

// runningStatus is a pod status with one running container started `ago` in the past.
func runningStatus(name, id string, ago time.Duration, started *bool) v1.PodStatus {
	return v1.PodStatus{
		Phase: v1.PodRunning,
		PodIP: "127.0.0.1",
		ContainerStatuses: []v1.ContainerStatus{{
			Name:        name,
			ContainerID: id,
			Started:     started,
			State: v1.ContainerState{Running: &v1.ContainerStateRunning{
				StartedAt: metav1.NewTime(time.Now().Add(-ago)),
			}},
		}},
	}
}

func execProbe(mutate func(p *v1.Probe)) *v1.Probe {
	p := &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds:    10,
		TimeoutSeconds:   1,
		SuccessThreshold: 1,
		FailureThreshold: 3,
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func testPod(uid string, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "default", UID: k8stypes.UID(uid)},
		Spec:       v1.PodSpec{Containers: containers, RestartPolicy: v1.RestartPolicyAlways},
	}
}

// recv waits up to 5 s for an update.
func recv(t *testing.T, ch <-chan Update) Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("no update within 5s")
	}
	return Update{}
}

// noUpdate checks that no update is pending.
func noUpdate(t *testing.T, ch <-chan Update) {
	t.Helper()
	select {
	case u := <-ch:
		t.Fatalf("unexpected update %+v", u)
	default:
	}
}

// eventually polls cond for up to 2 seconds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
