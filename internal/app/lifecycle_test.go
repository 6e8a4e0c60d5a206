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
	lc.run(ctx, "loop", func(ctx context.Context) {
		<-ctx.Done()
		note("loop returned")
	})
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

func TestLifecycleWaitReady(t *testing.T) {
	t.Parallel()
	lc := newLifecycle(zaptest.NewLogger(t))
	calls := 0
	if err := lc.waitReady(context.Background(), "x", func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Errorf("waitReady = %v after %d calls", err, calls)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := lc.waitReady(ctx, "never", func() error { return errors.New("still starting") })
	if err == nil || !strings.Contains(err.Error(), "never not ready") || !strings.Contains(err.Error(), "still starting") {
		t.Errorf("waitReady = %v", err)
	}
}
