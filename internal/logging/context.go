package logging

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"go.uber.org/zap"
)

// Field names used for per-request logging.
const (
	RequestIDKey = "request_id"
	MethodKey    = "method"
)

// Request identifies one gRPC call.
type Request struct {
	// ID is unique per call (16 hex digits).
	ID string
	// Method is the full gRPC method, e.g. "/runtime.v1.RuntimeService/Version".
	Method string
}

type requestKey struct{}

// WithRequest returns a copy of ctx carrying req.
func WithRequest(ctx context.Context, req Request) context.Context {
	return context.WithValue(ctx, requestKey{}, req)
}

// RequestFromContext returns the request stored by WithRequest, if any.
func RequestFromContext(ctx context.Context) (Request, bool) {
	req, ok := ctx.Value(requestKey{}).(Request)
	return req, ok
}

// FromContext returns fallback with the request id and method fields added
// when ctx carries a Request, and fallback unchanged otherwise. A nil
// fallback is treated as zap.NewNop().
func FromContext(ctx context.Context, fallback *zap.Logger) *zap.Logger {
	if fallback == nil {
		fallback = zap.NewNop()
	}
	req, ok := RequestFromContext(ctx)
	if !ok {
		return fallback
	}
	return fallback.With(zap.String(RequestIDKey, req.ID), zap.String(MethodKey, req.Method))
}

// newRequestID returns 8 random bytes in hex.
func newRequestID() string {
	var b [8]byte
	// crypto/rand.Read never returns an error on supported platforms.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
