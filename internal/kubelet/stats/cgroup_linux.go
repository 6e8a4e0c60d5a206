package stats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The node's CPU and memory are those of the root cgroup, read the way cAdvisor (through
// runc's cgroup managers) reads them:
//
//   - v1 (also hybrid hosts that mount cgroup2 at /sys/fs/cgroup/unified): cpuacct.usage
//     of the cpuacct hierarchy; memory.usage_in_bytes and the total_* fields of
//     memory.stat of the memory hierarchy.
//   - v2: usage_usec of the root's cpu.stat; the root has no memory.current, so usage is
//     MemTotal - MemFree from /proc/meminfo (runc's rootStatsFromMeminfo), and the other
//     figures come from the root's memory.stat (anon, inactive_file, pgfault, pgmajfault)
//     or, on kernels without it, from /proc/meminfo and /proc/vmstat.
//
// Without any cgroup mount CPU falls back to /proc/stat and memory to /proc/meminfo.
// Where the hierarchies are mounted comes from mountinfo.

// userHZ is the unit of /proc/stat's CPU times (USER_HZ, 100 on every Linux ABI).
const userHZ = 100

// parseCgroupMounts reads cgroup mounts out of a mountinfo file. Fields are
// "id parent major:minor root mountpoint options [optional...] - fstype source super".
// The first mount of each hierarchy wins.
func parseCgroupMounts(r io.Reader) (cgroupMounts, error) {
	var m cgroupMounts
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
		mountpoint := unescapeMountinfo(fields[4])
		switch fields[sep+1] {
		case "cgroup2":
			if m.unified == "" {
				m.unified = mountpoint
			}
		case "cgroup":
			for _, opt := range strings.Split(fields[sep+3], ",") {
				switch {
				case opt == "cpuacct" && m.cpuacct == "":
					m.cpuacct = mountpoint
				case opt == "memory" && m.memory == "":
					m.memory = mountpoint
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("read mountinfo: %w", err)
	}
	return m, nil
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readNodeSample reads the root cgroup (and /proc) at time now.
func (h *hostReader) readNodeSample(now time.Time) (nodeSample, error) {
	m, err := h.cgroupMounts()
	if err != nil {
		return nodeSample{}, err
	}
	s := nodeSample{at: now}
	mem, err := readKeyValues(filepath.Join(h.procRoot, "meminfo"))
	if err != nil {
		return s, fmt.Errorf("read meminfo: %w", err)
	}
	// /proc/meminfo is in kB.
	s.memTotal = mem["MemTotal"] * 1024
	if total, ok := mem["SwapTotal"]; ok {
		s.hasSwap = true
		s.swapFree = mem["SwapFree"] * 1024
		s.swapUsage = subFloor(total, mem["SwapFree"]) * 1024
	}
	cpuErr := h.readNodeCPU(m, &s)
	memErr := h.readNodeMemory(m, mem, &s)
	if cpuErr != nil && memErr != nil {
		return s, errors.Join(cpuErr, memErr)
	}
	return s, nil
}

// readNodeCPU fills the cumulative CPU time of the root cgroup.
func (h *hostReader) readNodeCPU(m cgroupMounts, s *nodeSample) error {
	if m.cpuacct != "" {
		v, err := readUint(filepath.Join(m.cpuacct, "cpuacct.usage"))
		if err == nil {
			s.cpuNanos, s.hasCPU = v, true
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("root cgroup cpu: %w", err)
		}
	}
	if m.unified != "" {
		kv, err := readKeyValues(filepath.Join(m.unified, "cpu.stat"))
		if err == nil {
			if usec, ok := kv["usage_usec"]; ok {
				s.cpuNanos, s.hasCPU = usec*1000, true
				return nil
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("root cgroup cpu: %w", err)
		}
	}
	b, err := os.ReadFile(filepath.Join(h.procRoot, "stat"))
	if err != nil {
		return fmt.Errorf("read /proc/stat: %w", err)
	}
	n, err := parseProcStatCPU(b)
	if err != nil {
		return err
	}
	s.cpuNanos, s.hasCPU = n, true
	return nil
}

// parseProcStatCPU returns the busy CPU time of the "cpu" line of /proc/stat in
// nanoseconds: user + nice + system + irq + softirq + steal.
func parseProcStatCPU(b []byte) (uint64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 9 || f[0] != "cpu" {
			continue
		}
		var ticks uint64
		for _, i := range []int{1, 2, 3, 6, 7, 8} {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/stat cpu field %d: %w", i, err)
			}
			ticks += v
		}
		return ticks * (uint64(time.Second) / userHZ), nil
	}
	return 0, errors.New("/proc/stat has no cpu line")
}

// readNodeMemory fills the memory figures of the root cgroup.
func (h *hostReader) readNodeMemory(m cgroupMounts, mem map[string]uint64, s *nodeSample) error {
	if m.memory != "" {
		err := readMemoryV1(m.memory, s)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	var stat map[string]uint64
	if m.unified != "" {
		kv, err := readKeyValues(filepath.Join(m.unified, "memory.stat"))
		switch {
		case err == nil:
			stat = kv
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("root cgroup memory: %w", err)
		}
	}
	if stat == nil {
		// No memory.stat at the root (old kernel, or no cgroup2): /proc figures.
		vm, err := readKeyValues(filepath.Join(h.procRoot, "vmstat"))
		if err != nil {
			return fmt.Errorf("read vmstat: %w", err)
		}
		stat = map[string]uint64{
			"anon": mem["AnonPages"] * 1024, "inactive_file": mem["Inactive(file)"] * 1024,
			"pgfault": vm["pgfault"], "pgmajfault": vm["pgmajfault"],
		}
	}
	if _, ok := mem["MemTotal"]; !ok {
		return errors.New("meminfo has no MemTotal")
	}
	s.memUsage = subFloor(mem["MemTotal"], mem["MemFree"]) * 1024
	s.workingSet = subFloor(s.memUsage, stat["inactive_file"])
	s.rss = stat["anon"]
	s.pageFaults, s.majorPageFaults = stat["pgfault"], stat["pgmajfault"]
	s.hasMemory = true
	return nil
}

// readMemoryV1 reads a v1 memory cgroup directory (hierarchical total_* figures).
func readMemoryV1(dir string, s *nodeSample) error {
	usage, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return fmt.Errorf("root cgroup memory: %w", err)
	}
	stat, err := readKeyValues(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return fmt.Errorf("root cgroup memory: %w", err)
	}
	pick := func(name string) uint64 {
		if v, ok := stat["total_"+name]; ok {
			return v
		}
		return stat[name]
	}
	s.memUsage = usage
	s.workingSet = subFloor(usage, pick("inactive_file"))
	s.rss = pick("rss")
	s.pageFaults, s.majorPageFaults = pick("pgfault"), pick("pgmajfault")
	s.hasMemory = true
	return nil
}

// readUint reads a file holding one unsigned integer.
func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}

// readKeyValues reads "key value [unit]" lines (memory.stat, cpu.stat, vmstat) and
// "Key: value kB" lines (meminfo). Lines that do not parse are skipped.
func readKeyValues(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseKeyValues(b), nil
}

func parseKeyValues(b []byte) map[string]uint64 {
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
