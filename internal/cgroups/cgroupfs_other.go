//go:build !linux

package cgroups

import "errors"

// NewCgroupfs is Linux only.
func NewCgroupfs(Mounts) (Driver, error) {
	return nil, errors.New("cgroups: the cgroupfs driver needs Linux")
}

// UnitManager is Linux only.
type UnitManager interface{}

// NewSystemd is Linux only.
func NewSystemd(Mounts, UnitManager, string) (Driver, error) {
	return nil, errors.New("cgroups: the systemd driver needs Linux")
}

// AddProcess is Linux only.
func AddProcess(Mounts, string, int) error {
	return errors.New("cgroups: moving a process needs Linux")
}
