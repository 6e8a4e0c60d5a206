//go:build !linux

package stats

import (
	"context"
	"time"
)

// collect has nothing to read off Linux: only the machine series are served.
func (c *cadvisor) collect(context.Context, time.Time) error {
	c.order = nil
	return errUnsupported
}

// cadvisorFs holds nothing off Linux.
type cadvisorFs struct{}
