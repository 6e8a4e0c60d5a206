//go:build linux

package resources

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

	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

// ReadMachine reads the machine from /proc, /sys and /etc and statfs(2)s
// rootDir. Memory and the root filesystem are required (the error names what
// could not be read; the rest is still returned); the identifiers are best
// effort (empty when unreadable), as cAdvisor's.
func ReadMachine(rootDir string) (Machine, error) { return hostReader{}.machine(rootDir) }

// StatFilesystem samples the filesystem holding path or, when path does not
// exist yet, its nearest existing parent.
func StatFilesystem(path string) (Filesystem, error) {
	st, err := statfs(path)
	if err != nil {
		return Filesystem{}, err
	}
	bs := int64(st.Bsize)
	return Filesystem{
		Capacity: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs,
		Inodes: int64(st.Files), InodesFree: int64(st.Ffree),
	}, nil
}

// hostReader reads /proc, /sys and /etc under root ("" = the real ones).
type hostReader struct {
	root string
}

func (h hostReader) path(p string) string { return filepath.Join("/", h.root, p) }

func (h hostReader) read(p string) (string, error) {
	b, err := os.ReadFile(h.path(p))
	return strings.TrimSpace(string(b)), err
}

func (h hostReader) machine(rootDir string) (Machine, error) {
	var errs []error
	m := Machine{NumCPU: h.numCPU(), HugePages: h.hugePages()}
	if mem, err := procfs.ReadKeyed(h.path("/proc/meminfo")); err != nil {
		errs = append(errs, fmt.Errorf("read meminfo: %w", err))
	} else if m.MemoryCapacity, m.SwapCapacity = int64(mem["MemTotal"])*1024, int64(mem["SwapTotal"])*1024; m.MemoryCapacity == 0 {
		errs = append(errs, errors.New("no MemTotal in /proc/meminfo"))
	}
	if fs, err := StatFilesystem(rootDir); err != nil {
		errs = append(errs, err)
	} else {
		m.RootFsCapacity = fs.Capacity
	}
	var uts unix.Utsname
	if err := unix.Uname(&uts); err == nil {
		m.KernelVersion = unix.ByteSliceToString(uts.Release[:])
	}
	m.OSImage = h.osImage()
	m.MachineID = h.first("/etc/machine-id", "/var/lib/dbus/machine-id")
	m.SystemUUID = h.first("/sys/class/dmi/id/product_uuid", "/proc/device-tree/system-id", "/proc/device-tree/vm,uuid")
	m.BootID, _ = h.read("/proc/sys/kernel/random/boot_id")
	return m, errors.Join(errs...)
}

// numCPU counts the processors in /proc/cpuinfo (online CPUs), falling back to
// runtime.NumCPU.
func (h hostReader) numCPU() int {
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

// hugePages returns the preallocated huge pages per page size, in bytes.
func (h hostReader) hugePages() map[int64]int64 {
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

// osImage is PRETTY_NAME from /etc/os-release, else "Linux" (as cAdvisor).
func (h hostReader) osImage() string {
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
func (h hostReader) first(paths ...string) string {
	for _, p := range paths {
		if s, err := h.read(p); err == nil && s != "" {
			return strings.TrimRight(s, "\x00")
		}
	}
	return ""
}

// statfs statfs(2)s path or, when it does not exist yet, its nearest existing parent.
func statfs(path string) (unix.Statfs_t, error) {
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
