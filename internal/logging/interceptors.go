package logging

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// UnaryServerInterceptor returns an interceptor that stores a new Request in
// the call's context (see FromContext), logs the latency of successful calls
// at Debug and failed calls with their code at Info or Error (see levelForCode),
// and turns a panic in the handler into codes.Internal, logging the stack,
// so that one bad request never crashes the server.
func UnaryServerInterceptor(logger *zap.Logger) grpc.UnaryServerInterceptor {
	if logger == nil {
		logger = zap.NewNop()
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		ctx = WithRequest(ctx, Request{ID: newRequestID(), Method: info.FullMethod})
		lg := FromContext(ctx, logger)
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				resp, err = nil, recovered(lg, info.FullMethod, r)
			}
			logResult(lg, time.Since(start), err)
		}()
		return handler(ctx, req)
	}
}

// StreamServerInterceptor is the streaming counterpart of
// UnaryServerInterceptor; the handler sees the request through
// stream.Context().
func StreamServerInterceptor(logger *zap.Logger) grpc.StreamServerInterceptor {
	if logger == nil {
		logger = zap.NewNop()
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		ctx := WithRequest(ss.Context(), Request{ID: newRequestID(), Method: info.FullMethod})
		lg := FromContext(ctx, logger)
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				err = recovered(lg, info.FullMethod, r)
			}
			logResult(lg, time.Since(start), err)
		}()
		return handler(srv, &contextStream{ServerStream: ss, ctx: ctx})
	}
}

// contextStream replaces the context of a grpc.ServerStream.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }

// recovered logs a handler panic with its stack and returns the error the
// client receives.
func recovered(lg *zap.Logger, method string, r any) error {
	lg.Error("panic in gRPC handler",
		zap.String("panic", fmt.Sprint(r)),
		zap.ByteString("stack", debug.Stack()),
	)
	return status.Errorf(codes.Internal, "panic in %s: %v", method, r)
}

func logResult(lg *zap.Logger, latency time.Duration, err error) {
	if err == nil {
		lg.Debug("gRPC request finished", zap.Duration("latency", latency))
		return
	}
	code := status.Code(err)
	if ce := lg.Check(levelForCode(code), "gRPC request failed"); ce != nil {
		ce.Write(zap.Stringer("code", code), zap.Duration("latency", latency), zap.Error(err))
	}
}

// levelForCode logs server-side faults at Error and everything the caller
// caused or expects (NotFound, Unimplemented, Canceled, ...) at Info.
func levelForCode(code codes.Code) zapcore.Level {
	switch code {
	case codes.Unknown, codes.Internal, codes.DataLoss:
		return zapcore.ErrorLevel
	default:
		return zapcore.InfoLevel
	}
}
