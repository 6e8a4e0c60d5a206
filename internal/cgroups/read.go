package cgroups

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

// ErrGone means a cgroup file or directory does not exist: the cgroup was removed
// (its container stopped) or the controller is not there. Such errors match both
// ErrGone and fs.ErrNotExist.
var ErrGone = errors.New("cgroup is gone")

// Memory is a cgroup's memory figures, in bytes (page faults in events).
type Memory struct {
	Usage           uint64
	WorkingSet      uint64 // Usage - inactive_file, floored at 0
	RSS             uint64 // v1 total_rss, v2 anon
	PageFaults      uint64
	MajorPageFaults uint64
	Limit           uint64 // 0: unlimited or unknown
}

// Sample is one reading of a cgroup. The Has* fields say which parts could be read.
type Sample struct {
	CPUNanos  uint64 // cumulative CPU time
	HasCPU    bool
	Memory    Memory
	HasMemory bool
	Pids      uint64 // pids.current
	HasPids   bool
}

// ReadSample reads the CPU, memory and pids figures of one cgroup. On v1 the memory
// controller must be readable and the others are optional; on v2 cpu.stat must be
// readable, memory is optional, and memory.stat must be readable when memory.current
// is. A removed cgroup gives an error matching ErrGone.
func ReadSample(p Paths) (Sample, error) {
	if p.V2 {
		return readSampleV2(p.Unified)
	}
	return readSampleV1(p)
}

func readSampleV1(p Paths) (Sample, error) {
	var s Sample
	mem, err := ReadMemoryV1(p.Memory)
	if err != nil {
		return s, err
	}
	s.Memory, s.HasMemory = mem, true
	if p.CPUAcct != "" {
		if v, err := ReadCPUAcct(p.CPUAcct); err == nil {
			s.CPUNanos, s.HasCPU = v, true
		}
	}
	if p.Pids != "" {
		if v, err := ReadPids(p.Pids); err == nil {
			s.Pids, s.HasPids = v, true
		}
	}
	return s, nil
}

func readSampleV2(dir string) (Sample, error) {
	var s Sample
	cpu, ok, err := ReadCPUStat(dir)
	if err != nil {
		return s, err
	}
	s.CPUNanos, s.HasCPU = cpu, ok
	if usage, err := readUint(filepath.Join(dir, "memory.current")); err == nil {
		stat, err := ReadKeyed(filepath.Join(dir, "memory.stat"))
		if err != nil {
			return s, err
		}
		s.Memory, s.HasMemory = MemoryFromV2Stat(usage, stat), true
		// "max" (unlimited) does not parse: no limit.
		if limit, err := readUint(filepath.Join(dir, "memory.max")); err == nil {
			s.Memory.Limit = limit
		}
	}
	if v, err := ReadPids(dir); err == nil {
		s.Pids, s.HasPids = v, true
	}
	return s, nil
}

// ReadCPUAcct reads a v1 cpuacct directory's cumulative CPU time (cpuacct.usage, ns).
func ReadCPUAcct(dir string) (uint64, error) {
	return readUint(filepath.Join(dir, "cpuacct.usage"))
}

// ReadCPUStat reads a v2 directory's cumulative CPU time in nanoseconds (usage_usec of
// cpu.stat); ok is false when cpu.stat has no usage_usec.
func ReadCPUStat(dir string) (nanos uint64, ok bool, err error) {
	stat, err := ReadKeyed(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, false, err
	}
	usec, ok := stat["usage_usec"]
	return usec * 1000, ok, nil
}

// v1UnlimitedMemory: a v1 memory.limit_in_bytes at or above this (the kernel's
// "unlimited" is a page-rounded MaxInt64) is no limit. Every reader of the file
// uses it.
const v1UnlimitedMemory = 1 << 62

// ReadMemoryV1 reads a v1 memory directory: memory.usage_in_bytes and memory.stat must
// be readable; memory.limit_in_bytes is left out when unreadable or unlimited (the
// kernel's "unlimited" is a page-rounded MaxInt64).
func ReadMemoryV1(dir string) (Memory, error) {
	usage, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return Memory{}, err
	}
	stat, err := ReadKeyed(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return Memory{}, err
	}
	m := MemoryFromV1Stat(usage, stat)
	if limit, err := readUint(filepath.Join(dir, "memory.limit_in_bytes")); err == nil && limit < v1UnlimitedMemory {
		m.Limit = limit
	}
	return m, nil
}

// MemoryFromV1Stat builds the figures from a usage and a v1 memory.stat, taking the
// hierarchical total_* fields (the plain ones when a total_ field is missing).
func MemoryFromV1Stat(usage uint64, stat map[string]uint64) Memory {
	pick := func(name string) uint64 {
		if v, ok := stat["total_"+name]; ok {
			return v
		}
		return stat[name]
	}
	return Memory{
		Usage:           usage,
		WorkingSet:      subFloor(usage, pick("inactive_file")),
		RSS:             pick("rss"),
		PageFaults:      pick("pgfault"),
		MajorPageFaults: pick("pgmajfault"),
	}
}

// MemoryFromV2Stat builds the figures from a usage and a v2 memory.stat (anon,
// inactive_file, pgfault, pgmajfault). The v2 root cgroup has no memory.current: its
// callers pass MemTotal - MemFree of /proc/meminfo, as runc does.
func MemoryFromV2Stat(usage uint64, stat map[string]uint64) Memory {
	return Memory{
		Usage:           usage,
		WorkingSet:      subFloor(usage, stat["inactive_file"]),
		RSS:             stat["anon"],
		PageFaults:      stat["pgfault"],
		MajorPageFaults: stat["pgmajfault"],
	}
}

// ReadPids reads the number of tasks of a pids directory (v1) or a v2 directory.
func ReadPids(dir string) (uint64, error) {
	return readUint(filepath.Join(dir, "pids.current"))
}

// readFile reads a cgroup file; a missing file or directory matches ErrGone.
func readFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", ErrGone, err)
		}
		return nil, err
	}
	return b, nil
}

// readUint reads a file holding one unsigned number. v2's "max" (unlimited) is an
// error the callers treat as "no value".
func readUint(path string) (uint64, error) {
	b, err := readFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

// ReadMemoryStat reads memory.stat of the cgroup directory dir (the root
// cgroup's on v2, for the node's memory). A missing file matches ErrGone.
func ReadMemoryStat(dir string) (map[string]uint64, error) {
	return ReadKeyed(filepath.Join(dir, "memory.stat"))
}

// ReadKeyed reads a flat keyed file (see ParseKeyed). A missing file matches ErrGone.
func ReadKeyed(path string) (map[string]uint64, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return procfs.ParseKeyed(b), nil
}

func subFloor(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
