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

// v2Controllers are enabled down to a kubelet cgroup on v2 (those the root
// has).
var v2Controllers = []string{"cpu", "cpuset", "memory", "pids", "hugetlb", "io"}

// v2fs is cgroup v2: the unified hierarchy's mountpoint.
type v2fs struct{ root string }

func (f v2fs) mountpoints() []string { return []string{f.root} }

func (f v2fs) exists(path string) bool { return isDir(filepath.Join(f.root, path)) }

// validate lists the controllers the cgroup lacks.
func (f v2fs) validate(path string, n Name) error {
	data, err := os.ReadFile(filepath.Join(f.root, path, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("could not read controllers for cgroup %q: %w", []string(n), err)
	}
	have := strings.Fields(string(data))
	var missing []string
	for _, c := range []string{"cpu", "cpuset", "memory", "pids"} {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if missing != nil {
		return fmt.Errorf("cgroup %q has some missing controllers: %v", []string(n), strings.Join(missing, ", "))
	}
	return nil
}

// create enables the controllers in each ancestor's subtree_control and
// creates each level.
func (f v2fs) create(path string) error {
	avail, err := os.ReadFile(filepath.Join(f.root, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("read the root cgroup's controllers: %w", err)
	}
	var enable []string
	for _, c := range v2Controllers {
		if slices.Contains(strings.Fields(string(avail)), c) {
			enable = append(enable, "+"+c)
		}
	}
	dir := f.root
	for _, c := range splitPath(path) {
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

func (f v2fs) set(path string, r *Resources) error {
	if r == nil {
		return nil
	}
	dir := filepath.Join(f.root, path)
	if r.PidsLimit != nil {
		if err := writeFile(dir, "pids.max", limitString(*r.PidsLimit, "max")); err != nil {
			return err
		}
	}
	if r.Memory != nil {
		if err := writeFile(dir, "memory.max", limitString(*r.Memory, "max")); err != nil {
			return err
		}
	}
	if r.CPUShares != nil {
		if err := writeFile(dir, "cpu.weight", strconv.FormatUint(CPUSharesToWeight(*r.CPUShares), 10)); err != nil {
			return err
		}
	}
	if r.CPUQuota != nil || r.CPUPeriod != nil {
		quota, period := "max", uint64(QuotaPeriod)
		if r.CPUQuota != nil && *r.CPUQuota > 0 {
			quota = strconv.FormatInt(*r.CPUQuota, 10)
		}
		if r.CPUPeriod != nil && *r.CPUPeriod > 0 {
			period = *r.CPUPeriod
		}
		if err := writeFile(dir, "cpu.max", quota+" "+strconv.FormatUint(period, 10)); err != nil {
			return err
		}
	}
	return nil
}

// clearMemoryProtection writes memory.min and memory.low 0 (upstream does so
// on the node-allocatable cgroup when MemoryQoS, off by default, is off).
func (f v2fs) clearMemoryProtection(path string) error {
	dir := filepath.Join(f.root, path)
	for _, name := range []string{"memory.min", "memory.low"} {
		if err := writeFile(dir, name, "0"); err != nil {
			return err
		}
	}
	return nil
}

func (f v2fs) childDir(path string) string { return filepath.Join(f.root, path) }

func (f v2fs) read(path string) (Applied, error) {
	var out Applied
	dir := filepath.Join(f.root, path)
	w, err := readLimit(dir, "cpu.weight")
	if err != nil {
		return out, err
	}
	shares := WeightToCPUShares(uint64(w))
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
	mem, err := readLimit(dir, "memory.max")
	if err != nil {
		return out, err
	}
	out.Memory = &mem
	out.MemoryUsage, err = readLimit(dir, "memory.current")
	return out, err
}
