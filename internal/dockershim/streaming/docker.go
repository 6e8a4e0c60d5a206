package streaming

import (
	"context"
	"errors"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// Docker is the subset of *libdocker.Client this package uses.
type Docker interface {
	CreateExec(ctx context.Context, containerID string, opts libdocker.ExecOptions) (string, error)
	StartExec(ctx context.Context, execID string, tty bool) (libdocker.HijackedResponse, error)
	InspectExec(ctx context.Context, execID string) (libdocker.ExecInspect, error)
	ResizeExecTTY(ctx context.Context, execID string, height, width uint) error
	AttachContainer(ctx context.Context, id string, opts libdocker.AttachOptions) (libdocker.HijackedResponse, error)
	ResizeContainerTTY(ctx context.Context, id string, height, width uint) error
	InspectContainer(ctx context.Context, id string) (libdocker.ContainerJSON, error)
}

var _ Docker = (*libdocker.Client)(nil)

// Sentinel errors; match them with errors.Is.
var (
	// ErrInvalidArgument: a request or parameter is missing a required field or is malformed.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrExecTimeout: an Exec ran longer than its timeout and was killed.
	ErrExecTimeout = errors.New("exec timed out")
	// ErrNotStarted: a URL was requested before Start (or after Close).
	ErrNotStarted = errors.New("streaming server not started")
)
