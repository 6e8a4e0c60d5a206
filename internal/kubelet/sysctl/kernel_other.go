//go:build !linux

package sysctl

import (
	"errors"
	"fmt"
)

// platformHasSysctls reports whether the platform has kernel sysctls.
const platformHasSysctls = false

// KernelVersion returns the running kernel's release (uname -r), the
// argument SafeSysctls expects. Only Linux has one.
func KernelVersion() (string, error) {
	return "", fmt.Errorf("read kernel release: %w", errors.ErrUnsupported)
}
