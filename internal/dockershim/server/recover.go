package server

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The server recovers a panic inside one call at the edge: the call answers
// Internal, the panic is logged with its stack, and the server keeps serving
// the other calls. The recovery runs innermost, so the interceptors of
// Options (metrics, error mapping) see the Internal code.

// recoverUnary recovers panics of unary handlers.
func recoverUnary(logger *zap.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer recoverCall(logger, info.FullMethod, &err)
		return h(ctx, req)
	}
}

// recoverStream recovers panics of streaming handlers.
func recoverStream(logger *zap.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer recoverCall(logger, info.FullMethod, &err)
		return h(srv, ss)
	}
}

func recoverCall(logger *zap.Logger, method string, err *error) {
	r := recover()
	if r == nil {
		return
	}
	logger.Error("panic in a CRI call; answered Internal", zap.String("method", method),
		zap.String("panic", fmt.Sprint(r)), zap.StackSkip("stack", 2))
	*err = status.Errorf(codes.Internal, "panic in %s: %v", method, r)
}
