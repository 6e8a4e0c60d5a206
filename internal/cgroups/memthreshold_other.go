//go:build !linux

package cgroups

import (
	"context"
	"errors"
)

// ErrMemcgNotificationUnsupported means memory threshold notifications cannot be
// armed here: outside Linux there are no cgroups at all.
var ErrMemcgNotificationUnsupported = errors.New("memory cgroup threshold notification unsupported: no cgroup v1 memory controller")

// MemoryThresholdNotifier watches a cgroup v1 memory cgroup's usage on Linux. Here
// it cannot be built: NewMemoryThresholdNotifier always fails.
type MemoryThresholdNotifier struct{}

// NewMemoryThresholdNotifier returns ErrMemcgNotificationUnsupported outside Linux.
func NewMemoryThresholdNotifier(cgroupPath string, thresholdBytes int64) (*MemoryThresholdNotifier, error) {
	return nil, ErrMemcgNotificationUnsupported
}

// Run returns at once: there is nothing to wait for.
func (n *MemoryThresholdNotifier) Run(ctx context.Context, fire func()) {}

// Err returns nil: Run never fails here.
func (n *MemoryThresholdNotifier) Err() error { return nil }

// Close does nothing and returns nil.
func (n *MemoryThresholdNotifier) Close() error { return nil }
