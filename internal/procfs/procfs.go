// Package procfs reads the kernel's plain text files that are not cgroup
// files: flat keyed files (/proc/meminfo, /proc/vmstat) and the lines and path
// escapes of /proc/*/mountinfo. It imports nothing of this module; the cgroup layer,
// resources, stats and volumes use it.
package procfs

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// ReadKeyed reads a flat keyed file (see ParseKeyed).
func ReadKeyed(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseKeyed(b), nil
}

// ParseKeyed parses "key value" lines (memory.stat, cpu.stat, /proc/vmstat) and
// "Key: value kB" lines (/proc/meminfo, units left to the caller). Lines whose second
// field is not an unsigned number are skipped.
func ParseKeyed(b []byte) map[string]uint64 {
	out := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			continue
		}
		out[strings.TrimSuffix(f[0], ":")] = v
	}
	return out
}

// ParseUint reads an unsigned decimal without allocating (the hot readers of
// cgroup and diskstats files); false when empty, not a number or above
// 2^64-1.
func ParseUint(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// UnescapeMountinfo undoes the kernel's octal escapes of /proc/*/mountinfo paths
// (\040 space, \011 tab, \012 newline, \134 backslash).
func UnescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
