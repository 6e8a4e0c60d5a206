package dockershim

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/streaming"
)

// Sentinel errors of the shim. Handlers wrap them with context; ToGRPC maps them.
var (
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrUnimplemented      = errors.New("unimplemented")
	ErrUnavailable        = errors.New("unavailable")
)

// invalidArg returns an InvalidArgument error naming the field.
func invalidArg(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalidArgument, field, fmt.Sprintf(format, args...))
}

// unimplemented returns an Unimplemented error saying why.
func unimplemented(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnimplemented, fmt.Sprintf(format, args...))
}

// codeTable maps sentinels to gRPC codes, checked in order with errors.Is.
var codeTable = []struct {
	err  error
	code codes.Code
}{
	{ErrInvalidArgument, codes.InvalidArgument},
	{streaming.ErrInvalidArgument, codes.InvalidArgument},
	{ErrNotFound, codes.NotFound},
	{libdocker.ErrNotFound, codes.NotFound},
	{ErrAlreadyExists, codes.AlreadyExists},
	{ErrFailedPrecondition, codes.FailedPrecondition},
	{ErrUnimplemented, codes.Unimplemented},
	{ErrUnavailable, codes.Unavailable},
	{streaming.ErrExecTimeout, codes.DeadlineExceeded},
	{libdocker.ErrPullStalled, codes.DeadlineExceeded},
	{context.DeadlineExceeded, codes.DeadlineExceeded},
	{context.Canceled, codes.Canceled},
}

// ToGRPC converts an error of the shim into a gRPC status error. Errors that already
// carry a status are returned as they are; unknown errors become codes.Unknown.
func ToGRPC(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, e := range codeTable {
		if errors.Is(err, e.err) {
			return status.Error(e.code, err.Error())
		}
	}
	return status.Error(codes.Unknown, err.Error())
}
