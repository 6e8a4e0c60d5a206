package keylock

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestOneKeyNeverBlocksAnother: a held key blocks its own waiters (until the
// holder unlocks or the waiter's context ends) and TryLock, never another key;
// entries go once nobody holds or waits.
func TestOneKeyNeverBlocksAnother(t *testing.T) {
	var l Locks
	ctx := context.Background()
	unlockA, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := l.Lock(ctx, "b") // another key: at once
	if err != nil {
		t.Fatal(err)
	}
	unlockB()
	if _, ok := l.TryLock("a"); ok {
		t.Fatal("TryLock got a held key")
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held key with a short context: %v, want DeadlineExceeded", err)
	}

	var got sync.WaitGroup
	got.Go(func() {
		unlock, err := l.Lock(ctx, "a")
		if err != nil {
			t.Error(err)
			return
		}
		unlock()
	})
	time.Sleep(10 * time.Millisecond)
	unlockA()
	got.Wait()
	if n := l.Held(); n != 0 {
		t.Errorf("%d keys still held after every unlock, want 0", n)
	}
}
