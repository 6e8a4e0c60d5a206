//go:build linux

package nodestatus

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// linuxHost reads /proc, /sys and /etc under root ("" = the real ones) and
// statfs(2)s the root dir.
type linuxHost struct {
	root string
}

func newHost() host { return linuxHost{} }

func (h linuxHost) path(p string) string { return filepath.Join("/", h.root, p) }

func (h linuxHost) read(p string) (string, error) {
	b, err := os.ReadFile(h.path(p))
	return strings.TrimSpace(string(b)), err
}

// machine reads the static facts. Memory and the root filesystem are required;
// the identifiers are best effort (empty when unreadable), as cadvisor's.
func (h linuxHost) machine(rootDir string) (machineInfo, error) {
	var errs []error
	m := machineInfo{numCPU: h.numCPU(), hugePages: h.hugePages()}
	if mem, err := h.meminfo(); err != nil {
		errs = append(errs, err)
	} else if m.memoryCapacity = mem["MemTotal"]; m.memoryCapacity == 0 {
		errs = append(errs, errors.New("no MemTotal in /proc/meminfo"))
	}
	if fs, err := statFS(rootDir); err != nil {
		errs = append(errs, err)
	} else {
		m.fsCapacity = int64(fs.Blocks) * int64(fs.Bsize)
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		m.kernelVersion = unix.ByteSliceToString(uts.Release[:])
	}
	m.osImage = h.osImage()
	m.machineID = h.first("/etc/machine-id", "/var/lib/dbus/machine-id")
	m.systemUUID = h.first("/sys/class/dmi/id/product_uuid", "/proc/device-tree/system-id", "/proc/device-tree/vm,uuid")
	m.bootID, _ = h.read("/proc/sys/kernel/random/boot_id")
	return m, errors.Join(errs...)
}

// usage samples free memory, the root filesystem and the task count.
func (h linuxHost) usage(rootDir string) (usage, error) {
	var errs []error
	var u usage
	if mem, err := h.meminfo(); err != nil {
		errs = append(errs, err)
	} else {
		u.memoryCapacity, u.memoryAvailable = mem["MemTotal"], mem["MemAvailable"]
	}
	if fs, err := statFS(rootDir); err != nil {
		errs = append(errs, err)
	} else {
		u.fsCapacity = int64(fs.Blocks) * int64(fs.Bsize)
		u.fsAvailable = int64(fs.Bavail) * int64(fs.Bsize)
		u.inodes, u.inodesFree = int64(fs.Files), int64(fs.Ffree)
	}
	u.maxPID = h.maxPID()
	if n, err := h.runningTasks(); err != nil {
		errs = append(errs, err)
	} else {
		u.processes = n
	}
	return u, errors.Join(errs...)
}

// numCPU counts the processors in /proc/cpuinfo (online CPUs), falling back to
// runtime.NumCPU.
func (h linuxHost) numCPU() int {
	data, err := os.ReadFile(h.path("/proc/cpuinfo"))
	if err != nil {
		return runtime.NumCPU()
	}
	if n := countProcessors(data); n > 0 {
		return n
	}
	return runtime.NumCPU()
}

func countProcessors(cpuinfo []byte) int {
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		key, _, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "processor" {
			n++
		}
	}
	return n
}

// meminfo returns /proc/meminfo in bytes.
func (h linuxHost) meminfo() (map[string]int64, error) {
	data, err := os.ReadFile(h.path("/proc/meminfo"))
	if err != nil {
		return nil, fmt.Errorf("read meminfo: %w", err)
	}
	return parseMeminfo(data), nil
}

func parseMeminfo(data []byte) map[string]int64 {
	out := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if len(fields) > 1 && fields[1] == "kB" {
			v *= 1024
		}
		out[key] = v
	}
	return out
}

// hugePages returns the preallocated huge pages per page size, in bytes.
func (h linuxHost) hugePages() map[int64]int64 {
	dir := h.path("/sys/kernel/mm/hugepages")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[int64]int64{}
	for _, e := range entries {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if kb, ok = strings.CutSuffix(kb, "kB"); !ok {
			continue
		}
		size, err := strconv.ParseInt(kb, 10, 64)
		if err != nil {
			continue
		}
		nr, err := os.ReadFile(filepath.Join(dir, e.Name(), "nr_hugepages"))
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(nr)), 10, 64)
		if err != nil {
			continue
		}
		out[size*1024] = n * size * 1024
	}
	return out
}

// osImage is PRETTY_NAME from /etc/os-release, else "Linux" (as cadvisor).
func (h linuxHost) osImage() string {
	data, err := os.ReadFile(h.path("/etc/os-release"))
	if err != nil {
		return "Linux"
	}
	if name := parseOSRelease(data)["PRETTY_NAME"]; name != "" {
		return name
	}
	return "Linux"
}

func parseOSRelease(data []byte) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}
		if uq, err := strconv.Unquote(val); err == nil {
			val = uq
		} else {
			val = strings.Trim(val, `"'`)
		}
		out[key] = val
	}
	return out
}

// first returns the content of the first readable, non-empty file of paths.
func (h linuxHost) first(paths ...string) string {
	for _, p := range paths {
		if s, err := h.read(p); err == nil && s != "" {
			return strings.TrimRight(s, "\x00")
		}
	}
	return ""
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

// statFS statfs(2)s path or, when it does not exist yet, its nearest existing parent.
func statFS(path string) (unix.Statfs_t, error) {
	p := filepath.Clean(path)
	for {
		var st unix.Statfs_t
		err := unix.Statfs(p, &st)
		if err == nil {
			return st, nil
		}
		parent := filepath.Dir(p)
		if !errors.Is(err, unix.ENOENT) || parent == p {
			return st, fmt.Errorf("statfs %s: %w", path, err)
		}
		p = parent
	}
}
