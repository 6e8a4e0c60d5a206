package lifecycle

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestLoopsWait: Wait returns only once every loop has returned, and the
// loops run concurrently.
func TestLoopsWait(t *testing.T) {
	t.Parallel()
	var l Loops
	ctx, cancel := context.WithCancel(context.Background())
	var running, ended atomic.Int32
	for range 3 {
		l.Go(nil, "test", func() {
			running.Add(1)
			<-ctx.Done()
			ended.Add(1)
		})
	}
	for running.Load() != 3 {
		time.Sleep(time.Millisecond)
	}
	waited := make(chan struct{})
	go func() { l.Wait(); close(waited) }()
	select {
	case <-waited:
		t.Fatal("Wait returned while the loops run")
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	<-waited
	if n := ended.Load(); n != 3 {
		t.Errorf("Wait returned after %d of 3 loops ended", n)
	}
}
