//go:build !linux

package nodestatus

import (
	"errors"
	"runtime"
)

// errUnsupported is returned by the host readers outside Linux.
var errUnsupported = errors.New("reading the machine is only supported on linux")

// otherHost reports the CPU count only.
type otherHost struct{}

func newHost() host { return otherHost{} }

func (otherHost) machine(string) (machineInfo, error) {
	return machineInfo{numCPU: runtime.NumCPU()}, errUnsupported
}

func (otherHost) usage(string) (usage, error) { return usage{}, errUnsupported }
