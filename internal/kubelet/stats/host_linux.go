package stats

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// maxWalkEntries bounds one du-like walk; a bigger tree is reported as far as it was
// walked.
const maxWalkEntries = 1 << 20

// network reads the host's interfaces from /proc/net/dev, without the ones cAdvisor
// ignores. The default interface is eth0 as upstream, or else the interface of the
// default route.
func (h *hostReader) network(now time.Time) (*statsapi.NetworkStats, error) {
	b, err := os.ReadFile(filepath.Join(h.procRoot, "net", "dev"))
	if err != nil {
		return nil, fmt.Errorf("read net/dev: %w", err)
	}
	ifaces, err := parseNetDev(b)
	if err != nil {
		return nil, err
	}
	out := &statsapi.NetworkStats{Time: metav1.NewTime(now)}
	for _, i := range ifaces {
		if !ignoredInterface(i.Name) {
			out.Interfaces = append(out.Interfaces, i)
		}
	}
	def := defaultInterfaceName
	if !hasInterface(out.Interfaces, def) {
		def = h.defaultRouteInterface()
	}
	for _, i := range out.Interfaces {
		if i.Name == def {
			out.InterfaceStats = i
		}
	}
	return out, nil
}

// ignoredInterface is cAdvisor's isIgnoredDevice: loopback, veth pairs of containers,
// Docker's and nerdctl's bridges.
func ignoredInterface(name string) bool {
	n := strings.ToLower(name)
	for _, prefix := range []string{"lo", "veth", "docker", "nerdctl"} {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}

func hasInterface(ifaces []statsapi.InterfaceStats, name string) bool {
	for _, i := range ifaces {
		if i.Name == name {
			return true
		}
	}
	return false
}

// defaultRouteInterface returns the interface of the IPv4 default route from
// /proc/net/route, "" when there is none.
func (h *hostReader) defaultRouteInterface() string {
	b, err := os.ReadFile(filepath.Join(h.procRoot, "net", "route"))
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 8 && f[1] == "00000000" && f[7] == "00000000" {
			return f[0]
		}
	}
	return ""
}

// parseNetDev parses /proc/net/dev: two header lines, then "name: 16 counters" where
// counter 0 is rx bytes, 2 rx errors, 8 tx bytes and 10 tx errors.
func parseNetDev(b []byte) ([]statsapi.InterfaceStats, error) {
	var out []statsapi.InterfaceStats
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.Contains(name, "|") {
			continue
		}
		name = strings.TrimSpace(name)
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("net/dev line of %q has %d fields, want 16", name, len(f))
		}
		var v [4]uint64
		for j, i := range []int{0, 2, 8, 10} {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("net/dev %q field %d: %w", name, i, err)
			}
			v[j] = n
		}
		out = append(out, statsapi.InterfaceStats{Name: name, RxBytes: &v[0], RxErrors: &v[1], TxBytes: &v[2], TxErrors: &v[3]})
	}
	return out, sc.Err()
}

// rlimit is upstream's pidlimit.Stats: the smaller of kernel.pid_max and
// kernel.threads-max, and the number of tasks from /proc/loadavg (sysinfo's count
// when loadavg cannot be read).
func (h *hostReader) rlimit(now time.Time) *statsapi.RlimitStats {
	out := &statsapi.RlimitStats{Time: metav1.NewTime(now)}
	maxPID := int64(-1)
	for _, name := range []string{"pid_max", "threads-max"} {
		b, err := os.ReadFile(filepath.Join(h.procRoot, "sys", "kernel", name))
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && (maxPID < 0 || v < maxPID) {
			maxPID = v
		}
	}
	if maxPID >= 0 {
		out.MaxPID = &maxPID
	}
	procs, err := h.taskCount()
	if err != nil {
		var info unix.Sysinfo_t
		if unix.Sysinfo(&info) != nil {
			return out
		}
		procs = int64(info.Procs)
	}
	out.NumOfRunningProcesses = &procs
	return out
}

// taskCount reads the total number of tasks, the part after "/" of /proc/loadavg's
// fourth field ("0.10 0.20 0.30 2/3518 3715089").
func (h *hostReader) taskCount() (int64, error) {
	b, err := os.ReadFile(filepath.Join(h.procRoot, "loadavg"))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) < 5 {
		return 0, errors.New("loadavg: not enough fields")
	}
	_, total, ok := strings.Cut(f[3], "/")
	if !ok {
		return 0, fmt.Errorf("loadavg: bad task field %q", f[3])
	}
	return strconv.ParseInt(total, 10, 64)
}

// BootTime is upstream's util.GetBootTime: now minus sysinfo's uptime, in
// seconds (the node's startTime, and the start of the node startup metrics).
func BootTime(now time.Time) (time.Time, error) {
	var info unix.Sysinfo_t
	if err := unix.Sysinfo(&info); err != nil {
		return time.Time{}, fmt.Errorf("sysinfo: %w", err)
	}
	return now.Add(-time.Duration(info.Uptime) * time.Second).Truncate(time.Second), nil
}

// statFs describes the filesystem holding path.
func statFs(path string, now time.Time) (fsInfo, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsInfo{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return fsInfo{
		at:         now,
		capacity:   st.Blocks * bs,
		available:  st.Bavail * bs,
		used:       (st.Blocks - st.Bfree) * bs,
		inodes:     st.Files,
		inodesFree: st.Ffree,
	}, nil
}

// walkDiskUsage is du -sx of root: allocated bytes (st_blocks * 512) and inodes of
// everything under root on root's device, hard links counted once. Entries that vanish
// or cannot be read are left out. It stops at maxWalkEntries (errWalkTruncated, with
// the usage so far) and when ctx ends.
func walkDiskUsage(ctx context.Context, root string, now time.Time) (diskUsage, error) {
	var rootSt syscall.Stat_t
	if err := syscall.Lstat(root, &rootSt); err != nil {
		return diskUsage{}, fmt.Errorf("lstat %s: %w", root, err)
	}
	u := diskUsage{at: now}
	seen := map[uint64]struct{}{}
	entries := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // vanished or unreadable: count what can be read
		}
		entries++
		if entries > maxWalkEntries {
			return errWalkTruncated
		}
		if entries%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Dev != rootSt.Dev {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if st.Nlink > 1 && !d.IsDir() {
			if _, dup := seen[st.Ino]; dup {
				return nil
			}
			seen[st.Ino] = struct{}{}
		}
		u.inodes++
		u.bytes += uint64(st.Blocks) * 512
		return nil
	})
	return u, err
}

// fileUsage is the allocated size of one file (st_blocks * 512) and its inode.
func fileUsage(path string) (diskUsage, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return diskUsage{}, fmt.Errorf("lstat %s: %w", path, err)
	}
	return diskUsage{at: time.Now(), bytes: uint64(st.Blocks) * 512, inodes: 1}, nil
}

// deviceOf is the device number of the filesystem holding path.
func deviceOf(path string) (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	return st.Dev, nil
}
