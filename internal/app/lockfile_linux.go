package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// acquireLockFile takes an exclusive flock on path (created if missing),
// waiting while another process holds it, as upstream's --lock-file, or
// until ctx ends (a signal still stops a kubelet that waits). The lock lasts
// as long as the returned file stays open.
func acquireLockFile(ctx context.Context, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("unable to acquire file lock on %q: %w", path, err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("unable to acquire file lock on %q: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("unable to acquire file lock on %q: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watchLockFileContention returns a channel closed when another process
// opens path or path is deleted (--exit-on-lock-contention: the kubelet then
// exits so the other can take the lock), or when ctx ends.
func watchLockFileContention(ctx context.Context, path string, logger *zap.Logger) (<-chan struct{}, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK) // pollable: Close ends a Read
	if err != nil {
		return nil, fmt.Errorf("unable to watch %q: %w", path, err)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN|unix.IN_DELETE_SELF); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("unable to watch %q: %w", path, err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	done := make(chan struct{})
	go func() {
		defer logging.HandleCrash(logger, "lock file watch")
		<-ctx.Done()
		_ = f.Close() // ends the read below
	}()
	go func() {
		defer close(done)
		defer logging.HandleCrash(logger, "lock file watch")
		buf := make([]byte, unix.SizeofInotifyEvent+unix.PathMax+1)
		n, err := f.Read(buf)
		switch {
		case err != nil && !errors.Is(err, os.ErrClosed):
			logger.Error("watching the lock file", zap.String("path", path), zap.Error(err))
		case n > 0:
			logger.Info("inotify event on the lock file: another process wants the lock, exiting", zap.String("path", path))
		}
	}()
	return done, nil
}
