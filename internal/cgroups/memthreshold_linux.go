//go:build linux

package cgroups

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrMemcgNotificationUnsupported means memory threshold notifications cannot be
// armed here: the host runs cgroup v2 (which has no cgroup.event_control) or has no
// v1 memory controller mounted.
var ErrMemcgNotificationUnsupported = errors.New("memory cgroup threshold notification unsupported: no cgroup v1 memory controller")

// MemoryThresholdNotifier fires when a cgroup v1 memory cgroup's
// memory.usage_in_bytes crosses a threshold. The kernel signals an eventfd that was
// registered through the cgroup's cgroup.event_control file.
//
// The kernel signals a crossing in either direction (rising above the threshold and
// falling back below it), checks thresholds only every so many page charges, and
// does not signal when usage is already above the threshold at arming time. Callers
// should re-read the usage when fired rather than assume which way it went.
//
// Lifecycle:
//
//   - NewMemoryThresholdNotifier opens the descriptors and arms the threshold; it
//     starts nothing.
//   - Run waits for notifications until its ctx ends, Close is called, or the
//     cgroup is removed (Err then matches ErrGone). One Run at a time; Run may be
//     called again after it returned because its ctx ended.
//   - Close releases the descriptors. It never waits for fire: while Run is active
//     Close wakes it, and Run releases the descriptors on its way out.
type MemoryThresholdNotifier struct {
	dir string // the cgroup's directory, for error messages

	mu      sync.Mutex
	fds     thresholdFDs // all -1 once released
	closed  bool         // Close was called
	running bool         // a Run is active and owns the descriptors
	err     error        // what ended the last Run, nil for ctx or Close
}

// thresholdFDs are the descriptors a notifier holds.
type thresholdFDs struct {
	usage int // memory.usage_in_bytes, the watched file
	event int // eventfd the kernel signals
	wake  int // eventfd Close and ctx cancellation signal to wake Run
	epoll int // waits on event and wake
}

func noFDs() thresholdFDs {
	return thresholdFDs{usage: -1, event: -1, wake: -1, epoll: -1}
}

// NewMemoryThresholdNotifier arms a notification on the memory cgroup at cgroupPath
// for usage >= thresholdBytes. cgroupPath is relative to the v1 memory controller's
// mount ("/" or "" for its root, "/kubepods" for a child); it cannot leave the mount.
// It returns ErrMemcgNotificationUnsupported without a v1 memory controller, and an
// error matching ErrGone when the cgroup does not exist. No goroutine is started.
func NewMemoryThresholdNotifier(cgroupPath string, thresholdBytes int64) (*MemoryThresholdNotifier, error) {
	if thresholdBytes < 0 {
		return nil, fmt.Errorf("memory threshold %d: must not be negative", thresholdBytes)
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("find memory cgroup mount: %w", err)
	}
	defer f.Close()
	dir, err := memoryCgroupDir(f, cgroupPath)
	if err != nil {
		return nil, err
	}
	return armMemoryThreshold(dir, thresholdBytes)
}

// memoryCgroupDir maps cgroupPath to its directory under the v1 memory controller's
// mount listed in mountinfo. ".." elements cannot climb above the mount.
func memoryCgroupDir(mountinfo io.Reader, cgroupPath string) (string, error) {
	mounts, err := ParseMountinfo(mountinfo)
	if err != nil {
		return "", fmt.Errorf("find memory cgroup mount: %w", err)
	}
	mnt, ok := mounts.V1["memory"]
	if !ok {
		return "", fmt.Errorf("cgroup mode %v: %w", mounts.Mode(), ErrMemcgNotificationUnsupported)
	}
	return filepath.Join(mnt.Mountpoint, filepath.Clean("/"+cgroupPath)), nil
}

// armMemoryThreshold opens the descriptors for the memory cgroup directory dir and
// registers the threshold. On failure everything opened so far is closed again.
func armMemoryThreshold(dir string, threshold int64) (_ *MemoryThresholdNotifier, retErr error) {
	n := &MemoryThresholdNotifier{dir: dir, fds: noFDs()}
	defer func() {
		if retErr != nil {
			n.mu.Lock()
			defer n.mu.Unlock()
			_ = n.releaseLocked()
		}
	}()
	usagePath := filepath.Join(dir, "memory.usage_in_bytes")
	usage, err := unix.Open(usagePath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(usagePath, err)
	}
	n.fds.usage = usage
	if n.fds.event, err = newEventFD(); err != nil {
		return nil, fmt.Errorf("memory threshold eventfd: %w", err)
	}
	if n.fds.wake, err = newEventFD(); err != nil {
		return nil, fmt.Errorf("memory threshold wake eventfd: %w", err)
	}
	if n.fds.epoll, err = newEpoll(n.fds.event, n.fds.wake); err != nil {
		return nil, err
	}
	if err := registerThreshold(dir, n.fds.event, n.fds.usage, threshold); err != nil {
		return nil, err
	}
	return n, nil
}

// newEventFD returns a non-blocking eventfd, or the error.
func newEventFD() (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return -1, err
	}
	return fd, nil
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

// registerThreshold writes "<eventfd> <usage fd> <threshold>" to the cgroup's
// cgroup.event_control; the kernel keeps the registration until the eventfd is
// closed or the cgroup is removed.
func registerThreshold(dir string, eventFD, usageFD int, threshold int64) error {
	control := filepath.Join(dir, "cgroup.event_control")
	cfd, err := unix.Open(control, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return openError(control, err)
	}
	defer unix.Close(cfd)
	line := strconv.Itoa(eventFD) + " " + strconv.Itoa(usageFD) + " " + strconv.FormatInt(threshold, 10)
	if _, err := unix.Write(cfd, []byte(line)); err != nil {
		return fmt.Errorf("register memory threshold %d in %s: %w", threshold, control, err)
	}
	return nil
}

// openError wraps the failure to open a cgroup file; a missing one matches ErrGone.
func openError(path string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("open %s: %w: %w", path, ErrGone, err)
	}
	return fmt.Errorf("open %s: %w", path, err)
}

// Run blocks until ctx ends, Close is called, or the cgroup is removed, calling fire
// once for each read of the kernel's notifications (a burst of crossings between two
// reads gives one call). fire runs on Run's goroutine and may call Close. Run returns
// at once when the notifier is closed or another Run is active. An error that ends
// Run (the cgroup removed, a failed wait) is reported by Err.
func (n *MemoryThresholdNotifier) Run(ctx context.Context, fire func()) {
	fds, ok := n.startRun()
	if !ok {
		return
	}
	err := n.loop(ctx, fds, fire)
	n.endRun(err)
}

// Err returns the error that ended the last Run: nil when it ended because its ctx
// ended or Close was called; one matching ErrGone when the cgroup was removed.
func (n *MemoryThresholdNotifier) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
}

// Close releases the eventfds and the memory.usage_in_bytes descriptor, which also
// drops the kernel's registration. It is idempotent and safe while Run is blocked
// (Run then returns promptly and releases them itself) or after it returned.
func (n *MemoryThresholdNotifier) Close() error {
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
func (n *MemoryThresholdNotifier) startRun() (thresholdFDs, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed || n.running {
		return thresholdFDs{}, false
	}
	n.running = true
	n.err = nil
	return n.fds, true
}

// endRun records how Run ended and releases the descriptors if Close came meanwhile.
func (n *MemoryThresholdNotifier) endRun(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.running = false
	n.err = err
	if n.closed {
		_ = n.releaseLocked()
	}
}

func (n *MemoryThresholdNotifier) isClosed() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// wake makes a blocked Run look at its ctx and at Close again.
func (n *MemoryThresholdNotifier) wake() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wakeLocked()
}

func (n *MemoryThresholdNotifier) wakeLocked() {
	if n.fds.wake < 0 {
		return
	}
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1) // an eventfd adds a host-endian uint64
	// The only failure of a non-blocking write is a counter about to overflow,
	// and that leaves the descriptor readable, which is all a wake needs.
	_, _ = unix.Write(n.fds.wake, one[:])
}

// releaseLocked closes every descriptor still open; the caller holds mu and no Run
// is active.
func (n *MemoryThresholdNotifier) releaseLocked() error {
	var errs []error
	for _, fd := range []*int{&n.fds.epoll, &n.fds.event, &n.fds.wake, &n.fds.usage} {
		if *fd < 0 {
			continue
		}
		if err := unix.Close(*fd); err != nil {
			errs = append(errs, fmt.Errorf("close fd %d: %w", *fd, err))
		}
		*fd = -1
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close memory threshold notifier of %s: %w", n.dir, err)
	}
	return nil
}

// loop waits on epoll until ctx ends, Close, or a fatal error. The descriptors stay
// open throughout: only endRun releases them while a Run is active.
func (n *MemoryThresholdNotifier) loop(ctx context.Context, fds thresholdFDs, fire func()) error {
	stop := context.AfterFunc(ctx, n.wake)
	defer stop()
	events := make([]unix.EpollEvent, 2)
	for ctx.Err() == nil && !n.isClosed() {
		count, err := unix.EpollWait(fds.epoll, events, -1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("wait for memory threshold of %s: %w", n.dir, err)
		}
		notified := false
		for _, ev := range events[:count] {
			switch ev.Fd {
			case int32(fds.wake):
				if _, err := drainEventFD(fds.wake); err != nil {
					return fmt.Errorf("read memory threshold wake eventfd: %w", err)
				}
			case int32(fds.event):
				notified = true
			}
		}
		if !notified {
			continue
		}
		got, err := drainEventFD(fds.event)
		if err != nil {
			return fmt.Errorf("read memory threshold eventfd of %s: %w", n.dir, err)
		}
		if !got || ctx.Err() != nil || n.isClosed() {
			continue
		}
		// The kernel also signals when it removes the cgroup: then the watched
		// file reads ENODEV and there is nothing left to watch.
		if err := n.checkCgroup(fds.usage); err != nil {
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

// checkCgroup reads the watched memory.usage_in_bytes through its descriptor; a
// removed cgroup gives an error matching ErrGone.
func (n *MemoryThresholdNotifier) checkCgroup(usageFD int) error {
	var buf [32]byte
	for {
		_, err := unix.Pread(usageFD, buf[:], 0)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENOENT):
			return fmt.Errorf("memory cgroup %s: %w: %w", n.dir, ErrGone, err)
		default:
			return fmt.Errorf("read memory.usage_in_bytes of %s: %w", n.dir, err)
		}
	}
}
