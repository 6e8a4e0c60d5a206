//go:build !linux

package eviction

import (
	"context"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// memcgNotifier waits for a memory threshold on Linux. Here it cannot be
// built: newMemcgNotifier always fails.
type memcgNotifier struct{}

// newMemcgNotifier returns cgroups.ErrMemcgNotificationUnsupported outside
// Linux.
func newMemcgNotifier(string, int64) (*memcgNotifier, error) {
	return nil, cgroups.ErrMemcgNotificationUnsupported
}

// Run returns at once: there is nothing to wait for.
func (n *memcgNotifier) Run(context.Context, func()) {}

// Err returns nil: Run never fails here.
func (n *memcgNotifier) Err() error { return nil }

// Close does nothing and returns nil.
func (n *memcgNotifier) Close() error { return nil }
