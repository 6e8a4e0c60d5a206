package cm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// v1Subsystems are the v1 hierarchies a kubelet cgroup is created in (those
// mounted), as libcontainer's Apply does for the kubelet.
var v1Subsystems = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "hugetlb", "blkio", "devices",
	"freezer", "perf_event", "net_cls", "net_prio", "name=systemd"}

// v1Required are the hierarchies a cgroup must exist in to exist (upstream's
// Exists on v1; "systemd" is the named hierarchy).
var v1Required = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "name=systemd"}

// v2Controllers are enabled down to a kubelet cgroup on v2 (those the root has).
var v2Controllers = []string{"cpu", "cpuset", "memory", "pids", "hugetlb", "io"}

// cgroupFS writes cgroups straight into the cgroup filesystem, v1 (or the
// controllers of a hybrid host) or v2. Paths are cgroupfs paths ("/kubepods/
// burstable/pod<uid>").
type cgroupFS struct {
	v1 map[string]string // subsystem -> mountpoint
	v2 string            // the unified mountpoint, "" on v1
}

// newCgroupFS finds the hierarchies of mounts.
func newCgroupFS(mounts cgroups.Mounts) (*cgroupFS, error) {
	switch mounts.Mode() {
	case cgroups.ModeV2:
		return &cgroupFS{v2: mounts.V2.Mountpoint}, nil
	case cgroups.ModeV1, cgroups.ModeHybrid:
		f := &cgroupFS{v1: map[string]string{}}
		for _, s := range v1Subsystems {
			if m, ok := mounts.V1[s]; ok {
				f.v1[s] = m.Mountpoint
			}
		}
		for _, s := range []string{"cpu", "memory"} {
			if f.v1[s] == "" {
				return nil, fmt.Errorf("the %s cgroup controller is not mounted", s)
			}
		}
		return f, nil
	}
	return nil, errors.New("no cgroup hierarchy is mounted")
}

// mountpoints are the distinct mountpoints a cgroup lives in (cpu and cpuacct
// share one on most hosts), in a fixed order.
func (f *cgroupFS) mountpoints() []string {
	if f.v2 != "" {
		return []string{f.v2}
	}
	var out []string
	for _, s := range v1Subsystems {
		if mp := f.v1[s]; mp != "" && !slices.Contains(out, mp) {
			out = append(out, mp)
		}
	}
	return out
}

// Exists reports whether path exists in every required hierarchy.
func (f *cgroupFS) Exists(path string) bool {
	if f.v2 != "" {
		return isDir(filepath.Join(f.v2, path))
	}
	for _, s := range v1Required {
		if mp := f.v1[s]; mp != "" && !isDir(filepath.Join(mp, path)) {
			return false
		}
	}
	return true
}

// ClearMemoryProtection writes memory.min and memory.low 0 on a v2 cgroup
// (upstream does so on the node-allocatable cgroup when MemoryQoS, off by
// default, is off); v1 has neither file.
func (f *cgroupFS) ClearMemoryProtection(path string) error {
	if f.v2 == "" {
		return nil
	}
	dir := filepath.Join(f.v2, path)
	for _, name := range []string{"memory.min", "memory.low"} {
		if err := writeFile(dir, name, "0"); err != nil {
			return err
		}
	}
	return nil
}

// Validate is Exists with upstream's error: the paths missing on v1 (with
// hugetlb also required where it is mounted), the controllers a v2 cgroup
// lacks.
func (f *cgroupFS) Validate(path string, name cgroups.Name) error {
	if f.v2 != "" {
		data, err := os.ReadFile(filepath.Join(f.v2, path, "cgroup.controllers"))
		if err != nil {
			return fmt.Errorf("could not read controllers for cgroup %q: %w", []string(name), err)
		}
		have := strings.Fields(string(data))
		var missing []string
		for _, c := range []string{"cpu", "cpuset", "memory", "pids"} {
			if !slices.Contains(have, c) {
				missing = append(missing, c)
			}
		}
		if missing != nil {
			return fmt.Errorf("cgroup %q has some missing controllers: %v", []string(name), strings.Join(missing, ", "))
		}
		return nil
	}
	var missing []string
	for _, s := range append(slices.Clone(v1Required), "hugetlb") {
		if mp := f.v1[s]; mp != "" && !isDir(filepath.Join(mp, path)) {
			missing = append(missing, filepath.Join(mp, path))
		}
	}
	if missing != nil {
		return fmt.Errorf("cgroup %q has some missing paths: %v", []string(name), strings.Join(missing, ", "))
	}
	return nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// Create makes path (and missing parents) in every hierarchy and sets rc.
func (f *cgroupFS) Create(path string, rc *cgroups.Resources) error {
	if f.v2 != "" {
		if err := f.createV2(path); err != nil {
			return err
		}
	} else {
		for _, mp := range f.mountpoints() {
			if err := mkdirCgroup(mp, path, mp == f.v1["cpuset"]); err != nil {
				return err
			}
		}
	}
	return f.Set(path, rc)
}

// mkdirCgroup creates path under the mountpoint level by level; in the cpuset
// hierarchy a new level gets its parent's cpus and mems (an empty cpuset takes
// no task).
func mkdirCgroup(mp, path string, cpuset bool) error {
	dir := mp
	for _, c := range strings.Split(strings.Trim(path, "/"), "/") {
		if c == "" {
			continue
		}
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

// createV2 enables the controllers in each ancestor's subtree_control and
// creates each level.
func (f *cgroupFS) createV2(path string) error {
	avail, err := os.ReadFile(filepath.Join(f.v2, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("read the root cgroup's controllers: %w", err)
	}
	var enable []string
	for _, c := range v2Controllers {
		if slices.Contains(strings.Fields(string(avail)), c) {
			enable = append(enable, "+"+c)
		}
	}
	dir := f.v2
	for _, c := range strings.Split(strings.Trim(path, "/"), "/") {
		if c == "" {
			continue
		}
		if err := writeFile(dir, "cgroup.subtree_control", strings.Join(enable, " ")); err != nil {
			return err
		}
		dir = filepath.Join(dir, c)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// Set writes rc into path's files.
func (f *cgroupFS) Set(path string, rc *cgroups.Resources) error {
	if rc == nil {
		return nil
	}
	if f.v2 != "" {
		return setV2(filepath.Join(f.v2, path), rc)
	}
	if cpu := f.v1["cpu"]; cpu != "" {
		dir := filepath.Join(cpu, path)
		if rc.CPUShares != nil {
			if err := writeFile(dir, "cpu.shares", strconv.FormatUint(*rc.CPUShares, 10)); err != nil {
				return err
			}
		}
		if rc.CPUPeriod != nil {
			if err := writeFile(dir, "cpu.cfs_period_us", strconv.FormatUint(*rc.CPUPeriod, 10)); err != nil {
				return err
			}
		}
		if rc.CPUQuota != nil {
			if err := writeFile(dir, "cpu.cfs_quota_us", strconv.FormatInt(*rc.CPUQuota, 10)); err != nil {
				return err
			}
		}
	}
	if rc.Memory != nil {
		if err := writeFile(filepath.Join(f.v1["memory"], path), "memory.limit_in_bytes", limitString(*rc.Memory, "-1")); err != nil {
			return err
		}
	}
	if rc.PidsLimit != nil {
		if pids := f.v1["pids"]; pids != "" {
			if err := writeFile(filepath.Join(pids, path), "pids.max", limitString(*rc.PidsLimit, "max")); err != nil {
				return err
			}
		}
	}
	return nil
}

func setV2(dir string, rc *cgroups.Resources) error {
	if rc.PidsLimit != nil {
		if err := writeFile(dir, "pids.max", limitString(*rc.PidsLimit, "max")); err != nil {
			return err
		}
	}
	if rc.Memory != nil {
		if err := writeFile(dir, "memory.max", limitString(*rc.Memory, "max")); err != nil {
			return err
		}
	}
	if rc.CPUShares != nil {
		if err := writeFile(dir, "cpu.weight", strconv.FormatUint(cgroups.CPUSharesToWeight(*rc.CPUShares), 10)); err != nil {
			return err
		}
	}
	if rc.CPUQuota != nil || rc.CPUPeriod != nil {
		quota, period := "max", uint64(cgroups.QuotaPeriod)
		if rc.CPUQuota != nil && *rc.CPUQuota > 0 {
			quota = strconv.FormatInt(*rc.CPUQuota, 10)
		}
		if rc.CPUPeriod != nil && *rc.CPUPeriod > 0 {
			period = *rc.CPUPeriod
		}
		if err := writeFile(dir, "cpu.max", quota+" "+strconv.FormatUint(period, 10)); err != nil {
			return err
		}
	}
	return nil
}

// limitString is v as a limit: positive values as they are, others unlimited.
func limitString(v int64, unlimited string) string {
	if v > 0 {
		return strconv.FormatInt(v, 10)
	}
	return unlimited
}

func writeFile(dir, name, value string) error {
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o644); err != nil {
		return fmt.Errorf("write %s to %s: %w", value, filepath.Join(dir, name), err)
	}
	return nil
}

// Children lists the names of path's child cgroups.
func (f *cgroupFS) Children(path string) ([]string, error) {
	mp := f.v2
	if mp == "" {
		mp = f.v1["memory"]
	}
	entries, err := os.ReadDir(filepath.Join(mp, path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// Destroy kills what still runs in path (and below), then removes it from
// every hierarchy, deepest first. A missing cgroup is no error.
func (f *cgroupFS) Destroy(path string) error {
	if strings.Trim(path, "/") == "" {
		return errors.New("refusing to destroy the root cgroup")
	}
	for round := 0; ; round++ {
		pids := f.pids(path)
		if len(pids) == 0 {
			break
		}
		if round == 5 {
			return fmt.Errorf("cgroup %s: processes %v survive SIGKILL", path, pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var errs []error
	for _, mp := range f.mountpoints() {
		errs = append(errs, removeTree(filepath.Join(mp, path)))
	}
	return errors.Join(errs...)
}

// pids lists the processes of path and its descendants in every hierarchy.
func (f *cgroupFS) pids(path string) []int {
	var out []int
	for _, mp := range f.mountpoints() {
		_ = filepath.WalkDir(filepath.Join(mp, path), func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, l := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(l); err == nil && !slices.Contains(out, pid) {
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}

// removeTree removes the cgroup directory dir and its children, deepest
// first (a cgroup directory is removed with rmdir, its files go with it).
func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := syscall.Rmdir(dir); err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// Read returns path's cpu shares, CFS quota and period, memory limit (-1:
// none) and memory usage.
func (f *cgroupFS) Read(path string) (kubecontainer.PodCgroupResources, error) {
	var out kubecontainer.PodCgroupResources
	readInt := func(dir, name string) (int64, error) {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return 0, err
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return -1, nil
		}
		return strconv.ParseInt(s, 10, 64)
	}
	if f.v2 != "" {
		dir := filepath.Join(f.v2, path)
		w, err := readInt(dir, "cpu.weight")
		if err != nil {
			return out, err
		}
		shares := cgroups.WeightToCPUShares(uint64(w))
		out.CPUShares = &shares
		b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
		if err != nil {
			return out, err
		}
		quotaS, periodS, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
		quota := int64(-1)
		if quotaS != "max" {
			if quota, err = strconv.ParseInt(quotaS, 10, 64); err != nil {
				return out, fmt.Errorf("%s/cpu.max: %w", dir, err)
			}
		}
		period, err := strconv.ParseUint(periodS, 10, 64)
		if err != nil {
			return out, fmt.Errorf("%s/cpu.max: %w", dir, err)
		}
		out.CPUQuota, out.CPUPeriod = &quota, &period
		mem, err := readInt(dir, "memory.max")
		if err != nil {
			return out, err
		}
		out.Memory = &mem
		out.MemoryUsage, err = readInt(dir, "memory.current")
		return out, err
	}
	cpu := filepath.Join(f.v1["cpu"], path)
	shares, err := readInt(cpu, "cpu.shares")
	if err != nil {
		return out, err
	}
	quota, err := readInt(cpu, "cpu.cfs_quota_us")
	if err != nil {
		return out, err
	}
	period, err := readInt(cpu, "cpu.cfs_period_us")
	if err != nil {
		return out, err
	}
	s, p := uint64(shares), uint64(period)
	out.CPUShares, out.CPUQuota, out.CPUPeriod = &s, &quota, &p
	memDir := filepath.Join(f.v1["memory"], path)
	mem, err := readInt(memDir, "memory.limit_in_bytes")
	if err != nil {
		return out, err
	}
	if mem >= v1UnlimitedMemory {
		mem = -1
	}
	out.Memory = &mem
	out.MemoryUsage, err = readInt(memDir, "memory.usage_in_bytes")
	return out, err
}

// v1UnlimitedMemory: a v1 memory.limit_in_bytes at or above this (the
// kernel's page-rounded "max") is no limit.
const v1UnlimitedMemory = 1 << 62
