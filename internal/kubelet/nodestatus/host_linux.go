//go:build linux

package nodestatus

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/cgroupfs"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// linuxHost reads /proc under root ("" = the real one) and statfs(2)s the
// root dir.
type linuxHost struct {
	root string
}

func newHost() host { return linuxHost{} }

func (h linuxHost) path(p string) string { return filepath.Join("/", h.root, p) }

func (h linuxHost) read(p string) (string, error) {
	b, err := os.ReadFile(h.path(p))
	return strings.TrimSpace(string(b)), err
}

// usage samples free memory, the root filesystem and the task count.
func (h linuxHost) usage(rootDir string) (usage, error) {
	var errs []error
	var u usage
	if mem, err := cgroupfs.ReadKeyed(h.path("/proc/meminfo")); err != nil {
		errs = append(errs, fmt.Errorf("read meminfo: %w", err))
	} else {
		// /proc/meminfo is in kB.
		u.memoryCapacity, u.memoryAvailable = int64(mem["MemTotal"])*1024, int64(mem["MemAvailable"])*1024
	}
	if fs, err := resources.StatFilesystem(rootDir); err != nil {
		errs = append(errs, err)
	} else {
		u.fsCapacity, u.fsAvailable = fs.Capacity, fs.Available
		u.inodes, u.inodesFree = fs.Inodes, fs.InodesFree
	}
	u.maxPID = h.maxPID()
	if n, err := h.runningTasks(); err != nil {
		errs = append(errs, err)
	} else {
		u.processes = n
	}
	return u, errors.Join(errs...)
}

// maxPID is min(kernel.pid_max, kernel.threads-max), 0 when neither is readable.
func (h linuxHost) maxPID() int64 {
	var limit int64
	for _, p := range []string{"/proc/sys/kernel/pid_max", "/proc/sys/kernel/threads-max"} {
		s, err := h.read(p)
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(s, 10, 64); err == nil && (limit == 0 || v < limit) {
			limit = v
		}
	}
	return limit
}

// runningTasks is the task count from /proc/loadavg ("0.1 0.2 0.3 2/3518 99"),
// falling back to sysinfo(2) when unreadable (on the real root only).
func (h linuxHost) runningTasks() (int64, error) {
	if s, err := h.read("/proc/loadavg"); err == nil {
		if n, err := parseLoadavgTasks(s); err == nil {
			return n, nil
		}
	}
	if h.root != "" {
		return 0, errors.New("no task count in /proc/loadavg")
	}
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return 0, fmt.Errorf("sysinfo: %w", err)
	}
	return int64(info.Procs), nil
}

func parseLoadavgTasks(s string) (int64, error) {
	fields := strings.Fields(s)
	if len(fields) < 4 {
		return 0, fmt.Errorf("loadavg %q: too few fields", s)
	}
	_, total, ok := strings.Cut(fields[3], "/")
	if !ok {
		return 0, fmt.Errorf("loadavg %q: no running/total field", s)
	}
	return strconv.ParseInt(total, 10, 64)
}
