//go:build linux

package eviction

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// memcgNotifier fires when a memory threshold armed on a cgroup v1 memory
// cgroup (cgroups.MemoryThreshold) is crossed: it waits on the threshold's
// eventfd. The kernel signals a crossing in either direction, so the caller
// re-reads the usage when fired rather than assume which way it went.
//
// Lifecycle:
//
//   - newMemcgNotifier arms the threshold and opens the descriptors; it
//     starts nothing.
//   - Run waits for notifications until its ctx ends, Close is called, or the
//     cgroup is removed (Err then matches cgroups.ErrGone). One Run at a time;
//     Run may be called again after it returned because its ctx ended.
//   - Close releases the descriptors. It never waits for fire: while Run is
//     active Close wakes it, and Run releases the descriptors on its way out.
type memcgNotifier struct {
	threshold *cgroups.MemoryThreshold

	mu      sync.Mutex
	fds     waitFDs // all -1 once released
	closed  bool    // Close was called
	running bool    // a Run is active and owns the descriptors
	err     error   // what ended the last Run, nil for ctx or Close
}

// waitFDs are the descriptors the notifier waits with.
type waitFDs struct {
	wake  int // eventfd Close and ctx cancellation signal to wake Run
	epoll int // waits on the threshold's eventfd and wake
}

func noFDs() waitFDs { return waitFDs{wake: -1, epoll: -1} }

// newMemcgNotifier arms usage >= thresholdBytes on the memory cgroup at
// cgroupPath (cgroups.ArmMemoryThreshold: its errors, among them
// cgroups.ErrMemcgNotificationUnsupported and cgroups.ErrGone).
func newMemcgNotifier(cgroupPath string, thresholdBytes int64) (_ *memcgNotifier, retErr error) {
	th, err := cgroups.ArmMemoryThreshold(cgroupPath, thresholdBytes)
	if err != nil {
		return nil, err
	}
	n := &memcgNotifier{threshold: th, fds: noFDs()}
	defer func() {
		if retErr != nil {
			n.mu.Lock()
			defer n.mu.Unlock()
			_ = n.releaseLocked()
		}
	}()
	if n.fds.wake, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		n.fds.wake = -1
		return nil, fmt.Errorf("memory threshold wake eventfd: %w", err)
	}
	if n.fds.epoll, err = newEpoll(th.EventFD(), n.fds.wake); err != nil {
		return nil, err
	}
	return n, nil
}

// newEpoll returns an epoll descriptor watching fds for input.
func newEpoll(fds ...int) (_ int, retErr error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("memory threshold epoll: %w", err)
	}
	defer func() {
		if retErr != nil {
			_ = unix.Close(epfd)
		}
	}()
	for _, fd := range fds {
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
		if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return -1, fmt.Errorf("memory threshold epoll: add fd %d: %w", fd, err)
		}
	}
	return epfd, nil
}

// Run blocks until ctx ends, Close is called, or the cgroup is removed, calling fire
// once for each read of the kernel's notifications (a burst of crossings between two
// reads gives one call). fire runs on Run's goroutine and may call Close. Run returns
// at once when the notifier is closed or another Run is active. An error that ends
// Run (the cgroup removed, a failed wait) is reported by Err.
func (n *memcgNotifier) Run(ctx context.Context, fire func()) {
	fds, ok := n.startRun()
	if !ok {
		return
	}
	err := n.loop(ctx, fds, fire)
	n.endRun(err)
}

// Err returns the error that ended the last Run: nil when it ended because its ctx
// ended or Close was called; one matching cgroups.ErrGone when the cgroup was
// removed.
func (n *memcgNotifier) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// Close releases the descriptors and the threshold, which also drops the
// kernel's registration. It is idempotent and safe while Run is blocked (Run
// then returns promptly and releases them itself) or after it returned.
func (n *memcgNotifier) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	if n.running {
		n.wakeLocked()
		return nil
	}
	return n.releaseLocked()
}

// startRun marks a Run active and hands it the descriptors, unless the notifier is
// closed or already running.
func (n *memcgNotifier) startRun() (waitFDs, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.running {
		return waitFDs{}, false
	}
	n.running = true
	n.err = nil
	return n.fds, true
}

// endRun records how Run ended and releases the descriptors if Close came meanwhile.
func (n *memcgNotifier) endRun(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.running = false
	n.err = err
	if n.closed {
		_ = n.releaseLocked()
	}
}

func (n *memcgNotifier) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// wake makes a blocked Run look at its ctx and at Close again.
func (n *memcgNotifier) wake() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wakeLocked()
}

func (n *memcgNotifier) wakeLocked() {
	if n.fds.wake < 0 {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1) // an eventfd adds a host-endian uint64
	// The only failure of a non-blocking write is a counter about to overflow,
	// and that leaves the descriptor readable, which is all a wake needs.
	_, _ = unix.Write(n.fds.wake, one[:])
}

// releaseLocked closes every descriptor still open, then the threshold; the
// caller holds mu and no Run is active.
func (n *memcgNotifier) releaseLocked() error {
	var errs []error
	for _, fd := range []*int{&n.fds.epoll, &n.fds.wake} {
		if *fd < 0 {
			continue
		}
		if err := unix.Close(*fd); err != nil {
			errs = append(errs, fmt.Errorf("close fd %d: %w", *fd, err))
		}
		*fd = -1
	}
	if err := errors.Join(errs...); err != nil {
		_ = n.threshold.Close()
		return fmt.Errorf("close memory threshold notifier of %s: %w", n.threshold.Dir(), err)
	}
	return n.threshold.Close()
}

// loop waits on epoll until ctx ends, Close, or a fatal error. The descriptors stay
// open throughout: only endRun releases them while a Run is active.
func (n *memcgNotifier) loop(ctx context.Context, fds waitFDs, fire func()) error {
	stop := context.AfterFunc(ctx, n.wake)
	defer stop()
	event := n.threshold.EventFD()
	events := make([]unix.EpollEvent, 2)
	for ctx.Err() == nil && !n.isClosed() {
		count, err := unix.EpollWait(fds.epoll, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for memory threshold of %s: %w", n.threshold.Dir(), err)
		}
		notified := false
		for _, ev := range events[:count] {
			switch ev.Fd {
			case int32(fds.wake):
				if _, err := drainEventFD(fds.wake); err != nil {
					return fmt.Errorf("read memory threshold wake eventfd: %w", err)
				}
			case int32(event):
				notified = true
			}
		}
		if !notified {
			continue
		}
		got, err := drainEventFD(event)
		if err != nil {
			return fmt.Errorf("read memory threshold eventfd of %s: %w", n.threshold.Dir(), err)
		}
		if !got || ctx.Err() != nil || n.isClosed() {
			continue
		}
		// The kernel also signals when it removes the cgroup: then there is
		// nothing left to watch.
		if err := n.threshold.Gone(); err != nil {
			return err
		}
		fire()
	}
	return nil
}

// drainEventFD reads and resets an eventfd's counter; false when it was zero.
func drainEventFD(fd int) (bool, error) {
	var buf [8]byte
	for {
		_, err := unix.Read(fd, buf[:])
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return false, nil
		default:
			return false, err
		}
	}
}
