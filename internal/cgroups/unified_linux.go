package cgroups

import (
	"fmt"

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
