package cgroups

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DefaultRoot is where the cgroup hierarchies are mounted.
const DefaultRoot = "/sys/fs/cgroup"

// IsUnified reports whether root (DefaultRoot on a host) is the cgroup v2
// filesystem: statfs gives cgroup2's magic.
func IsUnified(root string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", root, err)
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC, nil
}

// SwapAccounting reports whether the kernel accounts swap to memory cgroups
// (upstream's swap controller check): on cgroup v1 the memory root's
// memory.memsw.limit_in_bytes exists, on cgroup v2 the memory.swap.max of
// this process's own cgroup (the root has none). root is the cgroup mount
// root (DefaultRoot).
func SwapAccounting(root string) bool {
	unified, err := IsUnified(root)
	if err != nil {
		return false
	}
	p := filepath.Join(root, "memory", "memory.memsw.limit_in_bytes")
	if unified {
		f, err := os.Open("/proc/self/cgroup")
		if err != nil {
			return false
		}
		defer f.Close()
		pc, err := ParseProcCgroup(f)
		if err != nil || !pc.HasV2 {
			return false
		}
		p = filepath.Join(root, pc.V2, "memory.swap.max")
	}
	_, err = os.Stat(p)
	return err == nil
}
