//go:build linux

package oomlog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// DevKmsg is the kernel log device.
const DevKmsg = "/dev/kmsg"

// recordBufSize fits the longest record /dev/kmsg returns (the kernel's
// CONSOLE_EXT_LOG_MAX); a smaller buffer makes the read fail with EINVAL.
const recordBufSize = 8192

// Log follows the kernel log for OOM kills. Its reads never block: the
// follower waits in Go's poller, and Killed reads whatever the kernel logged
// since, so that a kill logged before a container's exit is always seen by a
// status read after it.
type Log struct {
	f      *os.File
	rc     syscall.RawConn
	logger *zap.Logger
	onKill func(Kill)

	closeOnce sync.Once

	mu     sync.Mutex // guards what follows, and every read of the device
	buf    []byte
	killed killedSet
	broken error // the device failed: nothing more is read
}

// Options configure a Log.
type Options struct {
	Logger *zap.Logger
	// OnKill, when set, is called with every kill read, in the log's order,
	// those the log held at Open included (as upstream's OOM watcher reads
	// the whole log at start). It runs with the Log's lock held, on the
	// goroutine that read the record: it must be quick and must not call the
	// Log back.
	OnKill func(Kill)
}

// Open opens the kernel log at path (DevKmsg) and reads the records it holds
// already, so a container killed while no shim ran is known too. It fails
// where the log cannot be read (no /dev/kmsg in a container, no CAP_SYSLOG
// with kernel.dmesg_restrict).
func Open(path string, opts Options) (*Log, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the kernel log %s: %w", path, err)
	}
	return newLog(os.NewFile(uintptr(fd), path), opts)
}

// newLog follows f, a non-blocking file that returns one record per read.
func newLog(f *os.File, opts Options) (*Log, error) {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	rc, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("the kernel log %s: %w", f.Name(), err)
	}
	l := &Log{f: f, rc: rc, logger: opts.Logger, onKill: opts.OnKill, buf: make([]byte, recordBufSize)}
	l.sync()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		_ = f.Close()
		return nil, l.broken
	}
	return l, nil
}

// Run follows the log until ctx ends, then closes it. It returns early, with
// the error, when the device cannot be waited on or read; Killed then goes on
// reading at each call.
func (l *Log) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	err := l.rc.Read(func(fd uintptr) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.drainLocked(int(fd))
		return l.broken != nil
	})
	if ctx.Err() != nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken != nil {
		return l.broken
	}
	if err != nil {
		return fmt.Errorf("follow the kernel log: %w", err)
	}
	return nil
}

// Close closes the device. It is idempotent; Killed then answers from what
// was read.
func (l *Log) Close() error {
	var err error
	l.closeOnce.Do(func() { err = l.f.Close() })
	return err
}

// Killed reports whether the kernel killed a task of Docker container id for
// want of memory, after reading every record logged up to now.
func (l *Log) Killed(id string) bool {
	l.sync()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.killed.has(id)
}

// sync reads every record the kernel has logged and this Log has not read.
func (l *Log) sync() {
	_ = l.rc.Control(func(fd uintptr) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.drainLocked(int(fd))
	})
}

// drainLocked reads records until none is left; caller holds mu.
func (l *Log) drainLocked(fd int) {
	for l.broken == nil {
		n, err := unix.Read(fd, l.buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return
		case errors.Is(err, unix.EPIPE), errors.Is(err, unix.EINTR):
			// EPIPE: records were overwritten before they were read; the
			// next read goes on from the oldest one left.
			continue
		case err != nil:
			l.broken = fmt.Errorf("read the kernel log %s: %w", l.f.Name(), err)
			l.logger.Warn("kernel log unreadable; no further OOM kills are read from it", zap.Error(l.broken))
			return
		case n == 0:
			return
		}
		k, ok := Parse(l.buf[:n])
		if !ok {
			continue
		}
		if id := ContainerID(k.TaskMemcg); id != "" {
			l.killed.add(id)
		}
		if l.onKill != nil {
			l.onKill(k)
		}
	}
}
