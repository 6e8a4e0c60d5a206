package streaming

import (
	"errors"
	"fmt"
	"net"
	"time"

	"go.uber.org/zap"
)

// Defaults applied by New.
const (
	DefaultAddr              = "127.0.0.1:0"
	DefaultStreamIdleTimeout = 4 * time.Hour
)

// Options configures a Server.
type Options struct {
	// Addr is the listen address; default "127.0.0.1:0" (port chosen by the kernel).
	Addr string
	// Docker runs the execs and attaches. Required.
	Docker Docker
	// Logger receives the server's logs; nil means zap.NewNop().
	Logger *zap.Logger
	// StreamIdleTimeout closes streams idle for this long; default 4h like kubelet.
	StreamIdleTimeout time.Duration
}

// withDefaults returns a copy of o with the zero fields set to their defaults.
func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = DefaultAddr
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.StreamIdleTimeout == 0 {
		o.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	return o
}

// validate checks options that already had their defaults applied.
func (o Options) validate() error {
	var errs []error
	if o.Docker == nil {
		errs = append(errs, errors.New("Docker is required"))
	}
	if _, _, err := net.SplitHostPort(o.Addr); err != nil {
		errs = append(errs, fmt.Errorf("Addr %q: %w", o.Addr, err))
	}
	if o.StreamIdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("StreamIdleTimeout %s is negative", o.StreamIdleTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streaming options: %w: %w", ErrInvalidArgument, err)
	}
	return nil
}
