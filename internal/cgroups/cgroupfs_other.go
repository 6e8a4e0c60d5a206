//go:build !linux

package cgroups

import "errors"

// NewCgroupfs is Linux only.
func NewCgroupfs(Mounts) (Driver, error) {
	return nil, errors.New("cgroups: the cgroupfs driver needs Linux")
}
