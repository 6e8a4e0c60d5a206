package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// v1Subsystems are the v1 hierarchies a kubelet cgroup is created in (those
// mounted), as libcontainer's Apply does for the kubelet.
var v1Subsystems = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb", "blkio", "devices",
	"freezer", "perf_event", "net_cls", "net_prio", "name=systemd"}

// v1Required are the hierarchies a cgroup must exist in to exist (upstream's
// Exists on v1; "systemd" is the named hierarchy).
var v1Required = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "name=systemd"}

// v1fs is cgroup v1 (or a hybrid host's v1 controllers): subsystem ->
// mountpoint.
type v1fs map[string]string

func newV1fs(mounts Mounts) (v1fs, error) {
	f := v1fs{}
	for _, s := range v1Subsystems {
		if m, ok := mounts.V1[s]; ok {
			f[s] = m.Mountpoint
		}
	}
	for _, s := range []string{"cpu", "memory"} {
		if f[s] == "" {
			return nil, fmt.Errorf("the %s cgroup controller is not mounted", s)
		}
	}
	return f, nil
}

func (f v1fs) mountpoints() []string {
	var out []string
	for _, s := range v1Subsystems {
		if mp := f[s]; mp != "" && !slices.Contains(out, mp) {
			out = append(out, mp)
		}
	}
	return out
}

func (f v1fs) exists(path string) bool {
	for _, s := range v1Required {
		if mp := f[s]; mp != "" && !isDir(filepath.Join(mp, path)) {
			return false
		}
	}
	return true
}

// validate lists the paths missing in the required hierarchies (hugetlb too
// where it is mounted).
func (f v1fs) validate(path string, n Name) error {
	var missing []string
	for _, s := range append(slices.Clone(v1Required), "hugetlb") {
		if mp := f[s]; mp != "" && !isDir(filepath.Join(mp, path)) {
			missing = append(missing, filepath.Join(mp, path))
		}
	}
	if missing != nil {
		return fmt.Errorf("cgroup %q has some missing paths: %v", []string(n), strings.Join(missing, ", "))
	}
	return nil
}

func (f v1fs) create(path string) error {
	for _, mp := range f.mountpoints() {
		if err := mkdirV1(mp, path, mp == f["cpuset"]); err != nil {
			return err
		}
	}
	return nil
}

// mkdirV1 creates path under the mountpoint level by level; in the cpuset
// hierarchy a new level gets its parent's cpus and mems (an empty cpuset
// takes no task).
func mkdirV1(mp, path string, cpuset bool) error {
	dir := mp
	for _, c := range splitPath(path) {
		parent := dir
		dir = filepath.Join(dir, c)
		err := os.Mkdir(dir, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		if cpuset {
			for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
				b, err := os.ReadFile(filepath.Join(parent, file))
				if err != nil {
					return fmt.Errorf("create cgroup %s: %w", dir, err)
				}
				if err := writeFile(dir, file, strings.TrimSpace(string(b))); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func (f v1fs) set(path string, r *Resources) error {
	if r == nil {
		return nil
	}
	if cpu := f["cpu"]; cpu != "" {
		dir := filepath.Join(cpu, path)
		if r.CPUShares != nil {
			if err := writeFile(dir, "cpu.shares", strconv.FormatUint(*r.CPUShares, 10)); err != nil {
				return err
			}
		}
		if r.CPUPeriod != nil {
			if err := writeFile(dir, "cpu.cfs_period_us", strconv.FormatUint(*r.CPUPeriod, 10)); err != nil {
				return err
			}
		}
		if r.CPUQuota != nil {
			if err := writeFile(dir, "cpu.cfs_quota_us", strconv.FormatInt(*r.CPUQuota, 10)); err != nil {
				return err
			}
		}
	}
	if r.Memory != nil {
		if err := writeFile(filepath.Join(f["memory"], path), "memory.limit_in_bytes", limitString(*r.Memory, "-1")); err != nil {
			return err
		}
	}
	if r.PidsLimit != nil {
		if pids := f["pids"]; pids != "" {
			if err := writeFile(filepath.Join(pids, path), "pids.max", limitString(*r.PidsLimit, "max")); err != nil {
				return err
			}
		}
	}
	return nil
}

// clearMemoryProtection: v1 has neither memory.min nor memory.low.
func (f v1fs) clearMemoryProtection(string) error { return nil }

func (f v1fs) childDir(path string) string { return filepath.Join(f["memory"], path) }

func (f v1fs) read(path string) (Applied, error) {
	var out Applied
	cpu := filepath.Join(f["cpu"], path)
	shares, err := readLimit(cpu, "cpu.shares")
	if err != nil {
		return out, err
	}
	quota, err := readLimit(cpu, "cpu.cfs_quota_us")
	if err != nil {
		return out, err
	}
	period, err := readLimit(cpu, "cpu.cfs_period_us")
	if err != nil {
		return out, err
	}
	s, p := uint64(shares), uint64(period)
	out.CPUShares, out.CPUQuota, out.CPUPeriod = &s, &quota, &p
	memDir := filepath.Join(f["memory"], path)
	mem, err := readLimit(memDir, "memory.limit_in_bytes")
	if err != nil {
		return out, err
	}
	if mem >= v1UnlimitedMemory {
		mem = -1
	}
	out.Memory = &mem
	out.MemoryUsage, err = readLimit(memDir, "memory.usage_in_bytes")
	return out, err
}
