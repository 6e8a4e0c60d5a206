//go:build !linux

package resources

import (
	"errors"
	"runtime"
)

// errUnsupported is returned by the machine readers outside Linux.
var errUnsupported = errors.New("reading the machine is only supported on linux")

// ReadMachine reports the CPU count only.
func ReadMachine(string) (Machine, error) { return Machine{NumCPU: runtime.NumCPU()}, errUnsupported }

// StatFilesystem is unsupported outside Linux.
func StatFilesystem(string) (Filesystem, error) { return Filesystem{}, errUnsupported }
