//go:build !linux

package streaming

import (
	"context"
	"errors"
	"net"
)

// dialInNetns is only supported on Linux.
func dialInNetns(ctx context.Context, pid int, port int32) (net.Conn, error) {
	return nil, errors.ErrUnsupported
}
