//go:build linux

package streaming

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// killProcess sends SIGKILL to the host process pid; a process already gone is fine.
func killProcess(pid int) error {
	if err := unix.Kill(pid, unix.SIGKILL); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill process %d: %w", pid, err)
	}
	return nil
}
