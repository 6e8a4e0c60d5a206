package app

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	kdslifecycle "github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

func TestLifecycleStopsInReverseOrder(t *testing.T) {
	t.Parallel()
	lc := newLifecycle(zaptest.NewLogger(t))
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		order = append(order, s)
	}
	ctx := context.Background()
	lc.onStop("client", func() { note("client closed") })
	if err := lc.startComponent(ctx, "loop", &testComponent{note: note}); err != nil {
		t.Fatal(err)
	}
	if err := lc.startComponent(ctx, "refusing", &testComponent{note: note, err: errors.New("no socket")}); err == nil ||
		err.Error() != "start refusing: no socket" {
		t.Errorf("startComponent error = %v", err)
	}
	if err := lc.start("server", func() error { note("server started"); return nil }, func() { note("server closed") }); err != nil {
		t.Fatal(err)
	}
	err := lc.start("broken", func() error { return errors.New("port in use") }, func() { note("broken closed") })
	if err == nil || !strings.Contains(err.Error(), "start broken: port in use") {
		t.Errorf("start error = %v", err)
	}
	lc.shutdown()
	lc.shutdown() // nothing left
	want := []string{"server started", "server closed", "loop returned", "client closed"}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("order = %q, want %q", order, want)
	}
}

// testComponent notes when its loop returns, or refuses to start with err.
type testComponent struct {
	note  func(string)
	err   error
	loops kdslifecycle.Loops
}

func (c *testComponent) Start(ctx context.Context) error {
	if c.err != nil {
		return c.err
	}
	c.loops.Go(nil, "test", func() {
		<-ctx.Done()
		c.note("loop returned")
	})
	return nil
}

func (c *testComponent) Wait() { c.loops.Wait() }

func TestLifecycleWaitReady(t *testing.T) {
	t.Parallel()
	lc := newLifecycle(zaptest.NewLogger(t))
	ready := make(chan struct{})
	time.AfterFunc(20*time.Millisecond, func() { close(ready) })
	if err := lc.waitReady(context.Background(), "x", ready); err != nil {
		t.Errorf("waitReady = %v", err)
	}
	// Ready wins over an ended context.
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if err := lc.waitReady(ended, "x", ready); err != nil {
		t.Errorf("waitReady of a ready component with an ended ctx = %v", err)
	}
	ctx, cancel2 := context.WithCancelCause(context.Background())
	time.AfterFunc(20*time.Millisecond, func() { cancel2(errors.New("terminated")) })
	err := lc.waitReady(ctx, "never", make(chan struct{}))
	if err == nil || !strings.Contains(err.Error(), "never not ready: terminated") {
		t.Errorf("waitReady = %v", err)
	}
}
