package cgroups

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"time"
)

// ReadUint reads a file holding one number ("max" and other words are errors).
func (c *HeldFiles) ReadUint(path string, now time.Time) (uint64, error) {
	var v uint64
	err := c.ReadFile(path, now, func(b []byte) error {
		var err error
		v, err = strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		return nil
	})
	return v, err
}

// ReadInt reads a file holding one signed number (cpu.cfs_quota_us: -1 unlimited).
func (c *HeldFiles) ReadInt(path string, now time.Time) (int64, error) {
	var v int64
	err := c.ReadFile(path, now, func(b []byte) error {
		var err error
		v, err = strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
		if err != nil {
			return fmt.Errorf("parse %s: %w", path, err)
		}
		return nil
	})
	return v, err
}

// ReadKeyed reads the keys of a flat keyed file (memory.stat, cpu.stat) that want
// names; the others are skipped without being parsed.
func (c *HeldFiles) ReadKeyed(path string, now time.Time, want func(key string) bool) (map[string]uint64, error) {
	out := make(map[string]uint64, 8)
	err := c.ReadFile(path, now, func(b []byte) error {
		EachKeyed(b, func(k, v []byte) {
			if !want(string(k)) {
				return
			}
			if n, err := strconv.ParseUint(string(v), 10, 64); err == nil {
				out[string(k)] = n
			}
		})
		return nil
	})
	return out, err
}

// NextLine splits b at its first newline: the line (without it) and the rest
// (nil after the last line).
func NextLine(b []byte) (line, rest []byte) {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

// EachKeyed calls fn with the key and the (trimmed) value of each "key value" line
// of b, without allocating; lines without a space are skipped.
func EachKeyed(b []byte, fn func(key, value []byte)) {
	for len(b) > 0 {
		var line []byte
		line, b = NextLine(b)
		k, v, ok := bytes.Cut(line, []byte{' '})
		if !ok {
			continue
		}
		fn(k, bytes.TrimSpace(v))
	}
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

// Sample reads what ReadSample reads, through the held files: on v1 the memory
// controller must be readable and cpuacct and pids are optional; on v2 cpu.stat must
// be readable, memory is optional, and memory.stat must be readable when
// memory.current is.
func (c *HeldFiles) Sample(p Paths, now time.Time) (Sample, error) {
	if p.V2 {
		return c.sampleV2(p.Unified, now)
	}
	var s Sample
	usage, err := c.ReadUint(filepath.Join(p.Memory, "memory.usage_in_bytes"), now)
	if err != nil {
		return s, err
	}
	stat, err := c.ReadKeyed(filepath.Join(p.Memory, "memory.stat"), now, memoryStatKey)
	if err != nil {
		return s, err
	}
	s.Memory, s.HasMemory = MemoryFromV1Stat(usage, stat), true
	if limit, err := c.ReadUint(filepath.Join(p.Memory, "memory.limit_in_bytes"), now); err == nil && limit < v1UnlimitedMemory {
		s.Memory.Limit = limit
	}
	if p.CPUAcct != "" {
		if v, err := c.ReadUint(filepath.Join(p.CPUAcct, "cpuacct.usage"), now); err == nil {
			s.CPUNanos, s.HasCPU = v, true
		}
	}
	if p.Pids != "" {
		if v, err := c.ReadUint(filepath.Join(p.Pids, "pids.current"), now); err == nil {
			s.Pids, s.HasPids = v, true
		}
	}
	return s, nil
}

func (c *HeldFiles) sampleV2(dir string, now time.Time) (Sample, error) {
	var s Sample
	cpu, err := c.ReadKeyed(filepath.Join(dir, "cpu.stat"), now, cpuStatKey)
	if err != nil {
		return s, err
	}
	usec, ok := cpu["usage_usec"]
	s.CPUNanos, s.HasCPU = usec*1000, ok
	if usage, err := c.ReadUint(filepath.Join(dir, "memory.current"), now); err == nil {
		stat, err := c.ReadKeyed(filepath.Join(dir, "memory.stat"), now, memoryStatKey)
		if err != nil {
			return s, err
		}
		s.Memory, s.HasMemory = MemoryFromV2Stat(usage, stat), true
		if limit, err := c.ReadUint(filepath.Join(dir, "memory.max"), now); err == nil {
			s.Memory.Limit = limit
		}
	}
	if v, err := c.ReadUint(filepath.Join(dir, "pids.current"), now); err == nil {
		s.Pids, s.HasPids = v, true
	}
	return s, nil
}
