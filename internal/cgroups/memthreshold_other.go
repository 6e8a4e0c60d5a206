//go:build !linux

package cgroups

import "errors"

// ErrMemcgNotificationUnsupported means memory threshold notifications cannot be
// armed here: outside Linux there are no cgroups at all.
var ErrMemcgNotificationUnsupported = errors.New("memory cgroup threshold notification unsupported: no cgroup v1 memory controller")

// MemoryThreshold is a threshold on a cgroup v1 memory cgroup on Linux. Here
// it cannot be armed: ArmMemoryThreshold always fails.
type MemoryThreshold struct{}

// ArmMemoryThreshold returns ErrMemcgNotificationUnsupported outside Linux.
func ArmMemoryThreshold(cgroupPath string, thresholdBytes int64) (*MemoryThreshold, error) {
	return nil, ErrMemcgNotificationUnsupported
}

// Dir is "".
func (t *MemoryThreshold) Dir() string { return "" }

// EventFD is -1.
func (t *MemoryThreshold) EventFD() int { return -1 }

// Gone is nil.
func (t *MemoryThreshold) Gone() error { return nil }

// Close does nothing and returns nil.
func (t *MemoryThreshold) Close() error { return nil }
