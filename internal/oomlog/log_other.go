//go:build !linux

package oomlog

import (
	"context"
	"errors"

	"go.uber.org/zap"
)

// DevKmsg is the kernel log device (Linux only).
const DevKmsg = "/dev/kmsg"

// Log is the kernel log of OOM kills; there is none off Linux.
type Log struct{}

// Options configure a Log.
type Options struct {
	Logger *zap.Logger
	OnKill func(Kill)
}

// Open fails: only Linux has a kernel log of OOM kills.
func Open(string, Options) (*Log, error) {
	return nil, errors.New("no kernel log of OOM kills on this platform")
}

// Run returns at once.
func (*Log) Run(context.Context) error { return nil }

// Close does nothing.
func (*Log) Close() error { return nil }

// Killed reports no kill.
func (*Log) Killed(string) bool { return false }
