package network

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestKeyedLockSerializesSameKey(t *testing.T) {
	t.Parallel()
	l := newKeyedLock()
	var inside, maxInside atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := l.lock(context.Background(), "pod")
			if err != nil {
				t.Error(err)
				return
			}
			n := inside.Add(1)
			for {
				m := maxInside.Load()
				if n <= m || maxInside.CompareAndSwap(m, n) {
					break
				}
			}
			time.Sleep(2 * time.Millisecond)
			inside.Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	if got := maxInside.Load(); got != 1 {
		t.Errorf("%d holders at once, want 1", got)
	}
	if n := l.size(); n != 0 {
		t.Errorf("%d entries left, want 0", n)
	}
}

func TestKeyedLockDifferentKeysInParallel(t *testing.T) {
	t.Parallel()
	l := newKeyedLock()
	unlockA, err := l.lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	unlockB, err := l.lock(ctx, "b")
	if err != nil {
		t.Fatalf("lock b while a is held: %v", err)
	}
	unlockB()
	unlockA()
	unlockA() // a second call is harmless
	if n := l.size(); n != 0 {
		t.Errorf("%d entries left, want 0", n)
	}
}

func TestKeyedLockWaitHonoursContext(t *testing.T) {
	t.Parallel()
	l := newKeyedLock()
	unlock, err := l.lock(context.Background(), "pod")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.lock(ctx, "pod"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock with expiring ctx = %v, want DeadlineExceeded", err)
	}
	if n := l.size(); n != 1 {
		t.Errorf("%d entries while held, want 1", n)
	}
	unlock()
	if n := l.size(); n != 0 {
		t.Errorf("%d entries left, want 0", n)
	}
}
