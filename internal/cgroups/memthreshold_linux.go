//go:build linux

package cgroups

import (
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

// MemoryThreshold is a threshold registered on a cgroup v1 memory cgroup
// through its cgroup.event_control: the kernel signals EventFD when
// memory.usage_in_bytes crosses it (in either direction; it checks only
// every so many page charges, and not when usage is already above it when
// armed), and when the cgroup is removed (then Gone says so). Waiting for
// the signal is the caller's (the eviction manager's notifier).
type MemoryThreshold struct {
	dir string // the cgroup's directory, for error messages

	mu    sync.Mutex
	usage int // memory.usage_in_bytes, the watched file; -1 once closed
	event int // the eventfd the kernel signals (non-blocking); -1 once closed
}

// ArmMemoryThreshold registers usage >= thresholdBytes on the memory cgroup
// at cgroupPath, relative to the v1 memory controller's mount ("/" or "" for
// its root, "/kubepods" for a child; it cannot leave the mount). It returns
// ErrMemcgNotificationUnsupported without a v1 memory controller, and an
// error matching ErrGone when the cgroup does not exist.
func ArmMemoryThreshold(cgroupPath string, thresholdBytes int64) (*MemoryThreshold, error) {
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
func armMemoryThreshold(dir string, threshold int64) (_ *MemoryThreshold, retErr error) {
	t := &MemoryThreshold{dir: dir, usage: -1, event: -1}
	defer func() {
		if retErr != nil {
			_ = t.Close()
		}
	}()
	usagePath := filepath.Join(dir, "memory.usage_in_bytes")
	usage, err := unix.Open(usagePath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, openError(usagePath, err)
	}
	t.usage = usage
	if t.event, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		t.event = -1
		return nil, fmt.Errorf("memory threshold eventfd: %w", err)
	}
	if err := registerThreshold(dir, t.event, t.usage, threshold); err != nil {
		return nil, err
	}
	return t, nil
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

// Dir is the memory cgroup's directory.
func (t *MemoryThreshold) Dir() string { return t.dir }

// EventFD is the eventfd the kernel signals (non-blocking; -1 once closed).
// It stays the threshold's: read it, never close it.
func (t *MemoryThreshold) EventFD() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.event
}

// Gone reads the watched memory.usage_in_bytes through its descriptor: an
// error matching ErrGone when the cgroup was removed (the kernel signals the
// eventfd then too), nil while it exists.
func (t *MemoryThreshold) Gone() error {
	t.mu.Lock()
	fd := t.usage
	t.mu.Unlock()
	var buf [32]byte
	for {
		_, err := unix.Pread(fd, buf[:], 0)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENOENT):
			return fmt.Errorf("memory cgroup %s: %w: %w", t.dir, ErrGone, err)
		default:
			return fmt.Errorf("read memory.usage_in_bytes of %s: %w", t.dir, err)
		}
	}
}

// Close releases the eventfd and the memory.usage_in_bytes descriptor, which
// also drops the kernel's registration. It is idempotent.
func (t *MemoryThreshold) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	var errs []error
	for _, fd := range []*int{&t.event, &t.usage} {
		if *fd < 0 {
			continue
		}
		if err := unix.Close(*fd); err != nil {
			errs = append(errs, fmt.Errorf("close fd %d: %w", *fd, err))
		}
		*fd = -1
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close the memory threshold of %s: %w", t.dir, err)
	}
	return nil
}
