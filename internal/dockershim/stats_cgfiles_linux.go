package dockershim

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/cgroupfs"
)

// Cgroup files stay open between stats requests: re-reading an open cgroup file with
// pread at offset 0 is one system call, where os.ReadFile costs a path walk, open,
// fstat, a poller registration, two reads and a close (measured: 10µs against 80µs
// for the five files of a v1 sample). An open cgroup file does not keep the cgroup
// from being removed: once it is, reads fail with ENODEV and the file is closed.
// Files are also closed when their container dies or is removed (statsCollector
// observes Docker's events) and when no request read them for statsFileIdle.

const (
	// statsMaxHeldFiles bounds the open cgroup files; beyond it files are read and
	// closed at once.
	statsMaxHeldFiles = 8192
	// statsReadBuf is the read buffer; a file that fills it is read again whole.
	statsReadBuf = 16 << 10
)

// heldFile is one open cgroup file. mu serialises reads with closing, so that a read
// never uses a descriptor number that was closed (and maybe reused) meanwhile.
type heldFile struct {
	mu     sync.Mutex
	fd     int // -1: not open
	dead   bool
	usedAt time.Time // guarded by cgroupFiles.mu
}

// cgroupFiles keeps cgroup files open, by path.
type cgroupFiles struct {
	mu    sync.Mutex
	files map[string]*heldFile
	bufs  sync.Pool
}

func newCgroupFiles() *cgroupFiles {
	return &cgroupFiles{
		files: map[string]*heldFile{},
		bufs:  sync.Pool{New: func() any { b := make([]byte, statsReadBuf); return &b }},
	}
}

// get returns path's entry, nil when too many files are held already.
func (c *cgroupFiles) get(path string, now time.Time) *heldFile {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.files[path]
	if f == nil {
		if len(c.files) >= statsMaxHeldFiles {
			return nil
		}
		f = &heldFile{fd: -1}
		c.files[path] = f
	}
	f.usedAt = now
	return f
}

// readFile reads a cgroup file and hands its content to parse (valid during the call
// only); a missing file or removed cgroup matches errCgroupGone.
func (c *cgroupFiles) readFile(path string, now time.Time, parse func([]byte) error) error {
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	buf := *bp
	var n int
	var err error
	if f := c.get(path, now); f != nil {
		n, err = f.pread(path, buf)
	} else {
		n, err = readOnce(path, buf)
	}
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("%w: %s: %w", errCgroupGone, path, err)
		}
		return fmt.Errorf("read %s: %w", path, err)
	}
	if n == len(buf) { // larger than the buffer: rare, read it whole
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		return parse(b)
	}
	return parse(buf[:n])
}

// pread reads the file from offset 0, opening it first when needed. A file held from
// before that fails (its cgroup was removed, and maybe made again at the same path)
// is reopened and read once more; a failed fresh read leaves it closed.
func (f *heldFile) pread(path string, buf []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead {
		return readOnce(path, buf)
	}
	for attempt := 0; ; attempt++ {
		held := f.fd >= 0
		if !held {
			fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				return 0, err
			}
			f.fd = fd
		}
		n, err := unix.Pread(f.fd, buf, 0)
		if err == nil {
			return n, nil
		}
		f.closeLocked()
		if !held || attempt > 0 {
			return 0, err
		}
	}
}

func (f *heldFile) closeLocked() {
	if f.fd >= 0 {
		_ = unix.Close(f.fd)
		f.fd = -1
	}
}

// release closes and forgets the files under the given cgroup directories.
func (c *cgroupFiles) release(dirs ...string) {
	var drop []*heldFile
	c.mu.Lock()
	for path, f := range c.files {
		for _, d := range dirs {
			if d != "" && filepath.Dir(path) == d {
				drop = append(drop, f)
				delete(c.files, path)
				break
			}
		}
	}
	c.mu.Unlock()
	closeAll(drop)
}

// prune closes the files no request read since before.
func (c *cgroupFiles) prune(before time.Time) {
	var drop []*heldFile
	c.mu.Lock()
	for path, f := range c.files {
		if f.usedAt.Before(before) {
			drop = append(drop, f)
			delete(c.files, path)
		}
	}
	c.mu.Unlock()
	closeAll(drop)
}

// held is the number of cgroup files open (for tests).
func (c *cgroupFiles) held() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, f := range c.files {
		f.mu.Lock()
		if f.fd >= 0 {
			n++
		}
		f.mu.Unlock()
	}
	return n
}

// closeAll closes files already taken out of the map; a reader holding one reads
// without keeping it open from then on.
func closeAll(files []*heldFile) {
	for _, f := range files {
		f.mu.Lock()
		f.dead = true
		f.closeLocked()
		f.mu.Unlock()
	}
}

// readOnce reads a small file with open, read and close system calls only.
func readOnce(path string, buf []byte) (int, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	return unix.Read(fd, buf)
}

// readUint reads a file holding one number ("max" and other words are errors).
func (c *cgroupFiles) readUint(path string, now time.Time) (uint64, error) {
	var v uint64
	err := c.readFile(path, now, func(b []byte) error {
		var err error
		v, err = strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		return nil
	})
	return v, err
}

// readKeyed reads the keys of a flat keyed file (memory.stat, cpu.stat) that want
// names; the others are skipped without being parsed.
func (c *cgroupFiles) readKeyed(path string, now time.Time, want func(key string) bool) (map[string]uint64, error) {
	out := make(map[string]uint64, 8)
	err := c.readFile(path, now, func(b []byte) error {
		for len(b) > 0 {
			line := b
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				line, b = b[:i], b[i+1:]
			} else {
				b = nil
			}
			k, v, ok := bytes.Cut(line, []byte{' '})
			if !ok || !want(string(k)) {
				continue
			}
			if n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64); err == nil {
				out[string(k)] = n
			}
		}
		return nil
	})
	return out, err
}

// memoryStatKey names the memory.stat fields MemoryFromV1Stat and MemoryFromV2Stat
// use (v1 also with the hierarchical total_ prefix).
func memoryStatKey(k string) bool {
	switch k {
	case "inactive_file", "rss", "anon", "pgfault", "pgmajfault",
		"total_inactive_file", "total_rss", "total_pgfault", "total_pgmajfault":
		return true
	}
	return false
}

func cpuStatKey(k string) bool { return k == "usage_usec" }

// sample reads what cgroupfs.ReadSample reads, through the open files: on v1 the
// memory controller must be readable and cpuacct and pids are optional; on v2
// cpu.stat must be readable, memory is optional, and memory.stat must be readable
// when memory.current is.
func (c *cgroupFiles) sample(p cgroupPaths, now time.Time) (cgroupfs.Sample, error) {
	if p.v2 {
		return c.sampleV2(p.unified, now)
	}
	var s cgroupfs.Sample
	usage, err := c.readUint(filepath.Join(p.memory, "memory.usage_in_bytes"), now)
	if err != nil {
		return s, err
	}
	stat, err := c.readKeyed(filepath.Join(p.memory, "memory.stat"), now, memoryStatKey)
	if err != nil {
		return s, err
	}
	s.Memory, s.HasMemory = cgroupfs.MemoryFromV1Stat(usage, stat), true
	if limit, err := c.readUint(filepath.Join(p.memory, "memory.limit_in_bytes"), now); err == nil && limit < math.MaxInt64/2 {
		s.Memory.Limit = limit
	}
	if p.cpuacct != "" {
		if v, err := c.readUint(filepath.Join(p.cpuacct, "cpuacct.usage"), now); err == nil {
			s.CPUNanos, s.HasCPU = v, true
		}
	}
	if p.pids != "" {
		if v, err := c.readUint(filepath.Join(p.pids, "pids.current"), now); err == nil {
			s.Pids, s.HasPids = v, true
		}
	}
	return s, nil
}

func (c *cgroupFiles) sampleV2(dir string, now time.Time) (cgroupfs.Sample, error) {
	var s cgroupfs.Sample
	cpu, err := c.readKeyed(filepath.Join(dir, "cpu.stat"), now, cpuStatKey)
	if err != nil {
		return s, err
	}
	usec, ok := cpu["usage_usec"]
	s.CPUNanos, s.HasCPU = usec*1000, ok
	if usage, err := c.readUint(filepath.Join(dir, "memory.current"), now); err == nil {
		stat, err := c.readKeyed(filepath.Join(dir, "memory.stat"), now, memoryStatKey)
		if err != nil {
			return s, err
		}
		s.Memory, s.HasMemory = cgroupfs.MemoryFromV2Stat(usage, stat), true
		if limit, err := c.readUint(filepath.Join(dir, "memory.max"), now); err == nil {
			s.Memory.Limit = limit
		}
	}
	if v, err := c.readUint(filepath.Join(dir, "pids.current"), now); err == nil {
		s.Pids, s.HasPids = v, true
	}
	return s, nil
}
