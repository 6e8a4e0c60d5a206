package runtimestate

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime answers Status with st and err, counting the calls.
type fakeRuntime struct {
	mu       sync.Mutex
	st       *runtimeapi.RuntimeStatus
	handlers []*runtimeapi.RuntimeHandler
	features *runtimeapi.RuntimeFeatures
	err      error
	calls    int
}

func (f *fakeRuntime) Status(context.Context) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.StatusResponse{Status: f.st, RuntimeHandlers: f.handlers, Features: f.features}, nil
}

func (f *fakeRuntime) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func status(runtimeReady, networkReady bool) *runtimeapi.RuntimeStatus {
	return &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: runtimeReady, Reason: "R", Message: "runtime down"},
		{Type: runtimeapi.NetworkReady, Status: networkReady, Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"},
	}}
}

func TestState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc                     string
		st                       *runtimeapi.RuntimeStatus
		err                      error
		wantRuntime, wantNetwork string // "" = ready
	}{
		{desc: "ready", st: status(true, true)},
		{desc: "network not ready", st: status(true, false), wantNetwork: "container runtime network not ready: NetworkPluginNotReady: cni config uninitialized"},
		{desc: "runtime not ready", st: status(false, true), wantRuntime: "container runtime not ready: R: runtime down"},
		{desc: "status fails", err: errors.New("connection refused"),
			wantRuntime: "container runtime status check failed: connection refused", wantNetwork: "container runtime status check failed"},
		{desc: "conditions missing", st: &runtimeapi.RuntimeStatus{},
			wantRuntime: "container runtime condition RuntimeReady is missing", wantNetwork: "condition NetworkReady is missing"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			s, err := New(Options{Runtime: &fakeRuntime{st: tc.st, err: tc.err}})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ReadinessError(); err == nil || !strings.Contains(err.Error(), "not checked yet") {
				t.Errorf("before the first check: %v", err)
			}
			s.Check(context.Background())
			check := func(what string, err error, want string) {
				if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
					t.Errorf("%s = %v, want %q", what, err, want)
				}
			}
			check("RuntimeError", s.RuntimeError(), tc.wantRuntime)
			check("NetworkError", s.NetworkError(), tc.wantNetwork)
			want := tc.wantRuntime
			if want == "" {
				want = tc.wantNetwork
			}
			check("ReadinessError", s.ReadinessError(), want)
		})
	}
}

func TestRunChecksAtOnceAndPeriodically(t *testing.T) {
	t.Parallel()
	rt := &fakeRuntime{st: status(true, true)}
	s, err := New(Options{Runtime: rt, Period: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for rt.callCount() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d checks in 5s", rt.callCount())
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.ReadinessError(); err != nil {
		t.Errorf("ReadinessError = %v", err)
	}
	cancel()
	<-done
	// A check cut short records nothing.
	rt.mu.Lock()
	rt.err = errors.New("boom")
	rt.mu.Unlock()
	s.Check(ctx)
	if err := s.RuntimeError(); err != nil {
		t.Errorf("a cancelled check was recorded: %v", err)
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without Runtime: no error")
	}
}

func TestStateRuntimeHandlersAndFeatures(t *testing.T) {
	t.Parallel()
	rt := &fakeRuntime{st: status(false, true), handlers: []*runtimeapi.RuntimeHandler{
		{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}},
		{Name: "crun"},
	}, features: &runtimeapi.RuntimeFeatures{SupplementalGroupsPolicy: true}}
	s, err := New(Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	s.Check(context.Background())
	if h, f := s.RuntimeHandlers(), s.RuntimeFeatures(); h != nil || f != nil {
		t.Fatalf("runtime not ready: handlers %v, features %v; want none yet", h, f)
	}
	rt.mu.Lock()
	rt.st = status(true, false)
	rt.mu.Unlock()
	s.Check(context.Background())
	h := s.RuntimeHandlers()
	if len(h) != 2 || h[0].Name != "" || !*h[0].Features.RecursiveReadOnlyMounts || *h[0].Features.UserNamespaces ||
		h[1].Name != "crun" || *h[1].Features.RecursiveReadOnlyMounts || *h[1].Features.UserNamespaces {
		t.Errorf("handlers = %+v", h)
	}
	if f := s.RuntimeFeatures(); f == nil || !*f.SupplementalGroupsPolicy {
		t.Errorf("features = %+v, want supplementalGroupsPolicy true", f)
	}
}
