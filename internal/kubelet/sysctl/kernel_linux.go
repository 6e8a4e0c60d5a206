package sysctl

import (
	"fmt"
	"os"
	"strings"
)

// platformHasSysctls reports whether the platform has kernel sysctls.
const platformHasSysctls = true

// osReleasePath holds the running kernel's release, the text of uname -r.
const osReleasePath = "/proc/sys/kernel/osrelease"

// KernelVersion returns the running kernel's release (uname -r), the
// argument SafeSysctls expects.
func KernelVersion() (string, error) {
	b, err := os.ReadFile(osReleasePath)
	if err != nil {
		return "", fmt.Errorf("read kernel release: %w", err)
	}
	release := strings.TrimSpace(string(b))
	if release == "" {
		return "", fmt.Errorf("read kernel release: %s is empty", osReleasePath)
	}
	return release, nil
}
