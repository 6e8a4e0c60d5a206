package stats

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/procfs"
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
// Where the hierarchies are mounted comes from cgroups.Host. The cgroup files are parsed
// by internal/cgroups, which the dockershim shares for container stats.

// userHZ is the unit of /proc/stat's CPU times (USER_HZ, 100 on every Linux ABI).
const userHZ = 100

// readNodeSample reads the root cgroup (and /proc) at time now.
func (h *hostReader) readNodeSample(now time.Time) (nodeSample, error) {
	return h.readRoot(now, true)
}

// readRoot reads the node's memory (and, withCPU, its CPU) at time now;
// it fails when neither can be read.
func (h *hostReader) readRoot(now time.Time, withCPU bool) (nodeSample, error) {
	m, err := h.cgroups.Root()
	if err != nil {
		return nodeSample{}, err
	}
	s := nodeSample{at: now}
	mem, err := readProcKeyed(filepath.Join(h.procRoot, "meminfo"))
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
	cpuErr := errors.New("CPU not read")
	if withCPU {
		cpuErr = h.readNodeCPU(m, &s)
	}
	memErr := h.readNodeMemory(m, mem, &s)
	if cpuErr != nil && memErr != nil {
		return s, errors.Join(cpuErr, memErr)
	}
	return s, nil
}

// readNodeCPU fills the cumulative CPU time of the root cgroup: v1 cpuacct, else the
// cgroup2 root's cpu.stat, else /proc/stat.
func (h *hostReader) readNodeCPU(m cgroups.RootDirs, s *nodeSample) error {
	if m.CPUAcct != "" {
		v, err := cgroups.ReadCPUAcct(m.CPUAcct)
		if err == nil {
			s.cpuNanos, s.hasCPU = v, true
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("root cgroup cpu: %w", err)
		}
	}
	if m.Unified != "" {
		v, ok, err := cgroups.ReadCPUStat(m.Unified)
		switch {
		case err == nil && ok:
			s.cpuNanos, s.hasCPU = v, true
			return nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
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

// readNodeMemory fills the memory figures of the root cgroup: the v1 memory hierarchy,
// else usage from meminfo with the cgroup2 root's memory.stat or, without it, the /proc
// figures in memory.stat's names.
func (h *hostReader) readNodeMemory(m cgroups.RootDirs, mem map[string]uint64, s *nodeSample) error {
	if m.Memory != "" {
		v1, err := cgroups.ReadMemoryV1(m.Memory)
		if err == nil {
			s.setMemory(v1)
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("root cgroup memory: %w", err)
		}
	}
	var stat map[string]uint64
	if m.Unified != "" {
		kv, err := cgroups.ReadMemoryStat(m.Unified)
		switch {
		case err == nil:
			stat = kv
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("root cgroup memory: %w", err)
		}
	}
	if stat == nil {
		// No memory.stat at the root (old kernel, or no cgroup2): /proc figures.
		vm, err := readProcKeyed(filepath.Join(h.procRoot, "vmstat"))
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
	s.setMemory(cgroups.MemoryFromV2Stat(subFloor(mem["MemTotal"], mem["MemFree"])*1024, stat))
	return nil
}

// setMemory copies the root cgroup's memory figures (the node has no limit).
func (s *nodeSample) setMemory(m cgroups.Memory) {
	s.memUsage, s.workingSet, s.rss = m.Usage, m.WorkingSet, m.RSS
	s.pageFaults, s.majorPageFaults = m.PageFaults, m.MajorPageFaults
	s.hasMemory = true
}

// readProcKeyed reads a /proc file of "key value" or "Key: value kB" lines (meminfo,
// vmstat); lines that do not parse are skipped.
func readProcKeyed(path string) (map[string]uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return procfs.ParseKeyed(b), nil
}
