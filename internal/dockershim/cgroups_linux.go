package dockershim

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Cgroup reading for container and pod stats. The shim never asks Docker for stats:
// it finds a container's cgroups from /proc/<pid>/cgroup of its init process and reads
// the controller files directly. Both layouts are handled:
//
//   - v1 (one hierarchy per controller, e.g. /sys/fs/cgroup/{cpuacct,memory,pids}),
//     including hybrid hosts that also mount cgroup2 at /sys/fs/cgroup/unified;
//   - v2 (one unified hierarchy at /sys/fs/cgroup).
//
// Where the hierarchies are mounted comes from /proc/self/mountinfo, so mount roots
// other than "/" (nested containers) resolve correctly.

// errCgroupGone means the cgroup directory no longer exists (the container stopped).
var errCgroupGone = errors.New("cgroup is gone")

// cgroupMount is one mounted cgroup hierarchy: the cgroup path at its root and where it
// is mounted.
type cgroupMount struct {
	root       string
	mountpoint string
}

// cgroupMounts maps v1 controllers to their mounts; v2 is the unified mount, if any.
type cgroupMounts struct {
	v1 map[string]cgroupMount
	v2 *cgroupMount
}

// parseCgroupMountinfo reads the cgroup mounts out of a mountinfo file. Fields are
// "id parent major:minor root mountpoint options [optional...] - fstype source super".
func parseCgroupMountinfo(r io.Reader) (cgroupMounts, error) {
	m := cgroupMounts{v1: map[string]cgroupMount{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 5 || len(fields) < sep+4 {
			continue
		}
		mnt := cgroupMount{root: unescapeMountinfo(fields[3]), mountpoint: unescapeMountinfo(fields[4])}
		switch fields[sep+1] {
		case "cgroup2":
			if m.v2 == nil {
				mm := mnt
				m.v2 = &mm
			}
		case "cgroup":
			for _, opt := range strings.Split(fields[sep+3], ",") {
				if _, seen := m.v1[opt]; !seen && opt != "rw" && opt != "ro" {
					m.v1[opt] = mnt
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("read mountinfo: %w", err)
	}
	if len(m.v1) == 0 && m.v2 == nil {
		return m, errors.New("no cgroup hierarchy is mounted")
	}
	return m, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of mountinfo paths.
func unescapeMountinfo(s string) string {
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

// procCgroup is a parsed /proc/<pid>/cgroup: v1 controller paths and the v2 path.
type procCgroup struct {
	v1    map[string]string
	v2    string
	hasV2 bool
}

// parseProcCgroup parses lines "hierarchy-id:controllers:path".
func parseProcCgroup(r io.Reader) (procCgroup, error) {
	p := procCgroup{v1: map[string]string{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			p.v2, p.hasV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			p.v1[c] = parts[2]
		}
	}
	if err := sc.Err(); err != nil {
		return p, fmt.Errorf("read proc cgroup: %w", err)
	}
	if len(p.v1) == 0 && !p.hasV2 {
		return p, errors.New("no cgroup listed")
	}
	return p, nil
}

// cgroupPaths are the directories stats are read from. With v2 set only unified is
// used; with v1 each controller has its own directory.
type cgroupPaths struct {
	v2      bool
	unified string
	cpuacct string
	memory  string
	pids    string
}

// resolveCgroupPaths joins a process's cgroup paths with the mounts. v1 wins when the
// memory controller is mounted as v1 (hybrid hosts keep controllers in v1).
func resolveCgroupPaths(m cgroupMounts, p procCgroup) (cgroupPaths, error) {
	if mm, ok := m.v1["memory"]; ok {
		if _, ok := p.v1["memory"]; !ok {
			return cgroupPaths{}, errors.New("process has no v1 memory cgroup")
		}
		out := cgroupPaths{memory: joinCgroup(mm, p.v1["memory"])}
		if cm, ok := m.v1["cpuacct"]; ok && p.v1["cpuacct"] != "" {
			out.cpuacct = joinCgroup(cm, p.v1["cpuacct"])
		}
		if pm, ok := m.v1["pids"]; ok && p.v1["pids"] != "" {
			out.pids = joinCgroup(pm, p.v1["pids"])
		}
		return out, nil
	}
	if m.v2 != nil && p.hasV2 {
		return cgroupPaths{v2: true, unified: joinCgroup(*m.v2, p.v2)}, nil
	}
	return cgroupPaths{}, errors.New("no usable cgroup hierarchy for the process")
}

// joinCgroup maps a cgroup path onto its mount, dropping the mount's root prefix.
func joinCgroup(m cgroupMount, path string) string {
	rel := path
	if m.root != "/" {
		if r, ok := strings.CutPrefix(path, m.root); ok {
			rel = r
		}
	}
	return filepath.Join(m.mountpoint, rel)
}

// parent returns the paths one level up (the pod's cgroup for a container).
func (p cgroupPaths) parent() cgroupPaths {
	up := func(s string) string {
		if s == "" {
			return ""
		}
		return filepath.Dir(s)
	}
	return cgroupPaths{v2: p.v2, unified: up(p.unified), cpuacct: up(p.cpuacct), memory: up(p.memory), pids: up(p.pids)}
}

// readCgroupSample reads cpu, memory and pids figures of one cgroup.
func readCgroupSample(p cgroupPaths, now time.Time) (usageSample, error) {
	if p.v2 {
		return readCgroupV2(p.unified, now)
	}
	return readCgroupV1(p, now)
}

// readCgroupV1 reads cpuacct.usage, memory.usage_in_bytes, memory.stat and pids.current.
func readCgroupV1(p cgroupPaths, now time.Time) (usageSample, error) {
	s := usageSample{at: now}
	usage, err := readCgroupUint(filepath.Join(p.memory, "memory.usage_in_bytes"))
	if err != nil {
		return s, err
	}
	stat, err := readCgroupKeyed(filepath.Join(p.memory, "memory.stat"))
	if err != nil {
		return s, err
	}
	s.hasMemory = true
	s.memUsage = usage
	s.workingSet = subFloorU64(usage, stat["total_inactive_file"])
	s.rss = stat["total_rss"]
	s.pageFaults = stat["total_pgfault"]
	s.majorPageFaults = stat["total_pgmajfault"]
	if limit, err := readCgroupUint(filepath.Join(p.memory, "memory.limit_in_bytes")); err == nil && limit < math.MaxInt64/2 {
		s.memLimit = limit
	}
	if p.cpuacct != "" {
		if v, err := readCgroupUint(filepath.Join(p.cpuacct, "cpuacct.usage")); err == nil {
			s.cpuNanos, s.hasCPU = v, true
		}
	}
	if p.pids != "" {
		if v, err := readCgroupUint(filepath.Join(p.pids, "pids.current")); err == nil {
			s.pids, s.hasPids = v, true
		}
	}
	return s, nil
}

// readCgroupV2 reads cpu.stat, memory.current, memory.stat, memory.max and pids.current.
func readCgroupV2(dir string, now time.Time) (usageSample, error) {
	s := usageSample{at: now}
	cpu, err := readCgroupKeyed(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return s, err
	}
	if v, ok := cpu["usage_usec"]; ok {
		s.cpuNanos, s.hasCPU = v*1000, true
	}
	if usage, err := readCgroupUint(filepath.Join(dir, "memory.current")); err == nil {
		stat, err := readCgroupKeyed(filepath.Join(dir, "memory.stat"))
		if err != nil {
			return s, err
		}
		s.hasMemory = true
		s.memUsage = usage
		s.workingSet = subFloorU64(usage, stat["inactive_file"])
		s.rss = stat["anon"]
		s.pageFaults = stat["pgfault"]
		s.majorPageFaults = stat["pgmajfault"]
		if limit, err := readCgroupUint(filepath.Join(dir, "memory.max")); err == nil {
			s.memLimit = limit
		}
	}
	if v, err := readCgroupUint(filepath.Join(dir, "pids.current")); err == nil {
		s.pids, s.hasPids = v, true
	}
	return s, nil
}

// readCgroupFile reads a cgroup file; a missing file or directory is errCgroupGone.
func readCgroupFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", errCgroupGone, err)
		}
		return nil, err
	}
	return b, nil
}

// readCgroupUint reads a one-number file. "max" (v2 unlimited) is an error the caller
// treats as "no value".
func readCgroupUint(path string) (uint64, error) {
	b, err := readCgroupFile(path)
	if err != nil {
		return 0, err
	}
	return parseCgroupUint(b)
}

func parseCgroupUint(b []byte) (uint64, error) {
	v, err := strconv.ParseUint(string(bytes.TrimSpace(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse cgroup value %q: %w", bytes.TrimSpace(b), err)
	}
	return v, nil
}

// readCgroupKeyed reads a flat keyed file ("key value" per line).
func readCgroupKeyed(path string) (map[string]uint64, error) {
	b, err := readCgroupFile(path)
	if err != nil {
		return nil, err
	}
	return parseCgroupKeyed(b), nil
}

// parseCgroupKeyed parses "key value" lines, skipping lines that do not fit.
func parseCgroupKeyed(b []byte) map[string]uint64 {
	out := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}
