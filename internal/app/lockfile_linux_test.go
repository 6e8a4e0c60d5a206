package app

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// --lock-file is an exclusive flock; --exit-on-lock-contention notices
// another process opening the file.
func TestLockFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kubelet.lock")
	f, err := acquireLockFile(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A second taker waits, and gives up when its context ends.
	waitCtx, stopWaiting := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stopWaiting()
	if g, err := acquireLockFile(waitCtx, path); err == nil {
		g.Close()
		t.Fatal("the lock was taken twice")
	}
	other, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
		t.Fatal("a second exclusive lock was granted")
	}
	other.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, err := watchLockFileContention(ctx, path, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatal("contention reported before anyone opened the file")
	case <-time.After(100 * time.Millisecond):
	}
	contender, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	contender.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("an open by another process went unnoticed")
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	done2, err := watchLockFileContention(ctx2, path, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	cancel2()
	select {
	case <-done2:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end with its context")
	}
}
