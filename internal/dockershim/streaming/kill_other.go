//go:build !linux

package streaming

import "errors"

// killProcess is only supported on Linux.
func killProcess(pid int) error { return errors.ErrUnsupported }
