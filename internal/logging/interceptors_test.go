package logging

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

const testMethod = "/test.Service/Do"

func TestFromContext(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	base := zap.New(core)

	FromContext(context.Background(), base).Info("plain")
	ctx := WithRequest(context.Background(), Request{ID: "abc", Method: testMethod})
	FromContext(ctx, base).Info("scoped")
	FromContext(ctx, nil).Info("nil fallback must not panic")

	all := logs.All()
	if len(all) != 2 {
		t.Fatalf("got %d entries, want 2: %v", len(all), all)
	}
	if _, ok := all[0].ContextMap()[MethodKey]; ok {
		t.Errorf("plain entry has a method field: %v", all[0].ContextMap())
	}
	fields := all[1].ContextMap()
	if fields[MethodKey] != testMethod || fields[RequestIDKey] != "abc" {
		t.Errorf("scoped entry fields = %v, want method=%s request_id=abc", fields, testMethod)
	}
}

func TestUnaryServerInterceptor(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc      string
		handler   grpc.UnaryHandler
		wantCode  codes.Code
		wantMsg   string
		wantLevel zapcore.Level
	}{
		{
			desc:      "success logs latency at debug",
			handler:   func(ctx context.Context, req any) (any, error) { return "ok", nil },
			wantCode:  codes.OK,
			wantMsg:   "gRPC request finished",
			wantLevel: zapcore.DebugLevel,
		},
		{
			desc: "caller error logs at info",
			handler: func(ctx context.Context, req any) (any, error) {
				return nil, status.Error(codes.NotFound, "no such pod")
			},
			wantCode:  codes.NotFound,
			wantMsg:   "gRPC request failed",
			wantLevel: zapcore.InfoLevel,
		},
		{
			desc:      "plain error is Unknown and logs at error",
			handler:   func(ctx context.Context, req any) (any, error) { return nil, errors.New("boom") },
			wantCode:  codes.Unknown,
			wantMsg:   "gRPC request failed",
			wantLevel: zapcore.ErrorLevel,
		},
		{
			desc:      "panic becomes Internal",
			handler:   func(ctx context.Context, req any) (any, error) { panic("kaboom") },
			wantCode:  codes.Internal,
			wantMsg:   "panic in gRPC handler",
			wantLevel: zapcore.ErrorLevel,
		},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zapcore.DebugLevel)
			icpt := UnaryServerInterceptor(zap.New(core))
			var seen Request
			handler := func(ctx context.Context, req any) (any, error) {
				seen, _ = RequestFromContext(ctx)
				return test.handler(ctx, req)
			}
			resp, err := icpt(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: testMethod}, handler)
			if got := status.Code(err); got != test.wantCode {
				t.Fatalf("code = %v (err %v), want %v", got, err, test.wantCode)
			}
			if test.wantCode == codes.OK && resp != "ok" {
				t.Errorf("resp = %v, want ok", resp)
			}
			if seen.Method != testMethod || len(seen.ID) != 16 {
				t.Errorf("handler saw request %+v, want method %s and a 16-digit id", seen, testMethod)
			}
			entries := logs.FilterMessage(test.wantMsg).All()
			if len(entries) != 1 {
				t.Fatalf("want one %q entry, got %v", test.wantMsg, logs.All())
			}
			e := entries[0]
			if e.Level != test.wantLevel {
				t.Errorf("level = %v, want %v", e.Level, test.wantLevel)
			}
			if f := e.ContextMap(); f[MethodKey] != testMethod || f[RequestIDKey] != seen.ID {
				t.Errorf("entry fields = %v, want method and request id %s", f, seen.ID)
			}
		})
	}
}

func TestUnaryServerInterceptorLogsPanicStack(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	icpt := UnaryServerInterceptor(zap.New(core))
	_, err := icpt(context.Background(), nil, &grpc.UnaryServerInfo{FullMethod: testMethod}, panickingHandler)
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "kaboom") {
		t.Fatalf("err = %v, want Internal mentioning the panic value", err)
	}
	entries := logs.FilterMessage("panic in gRPC handler").All()
	if len(entries) != 1 {
		t.Fatalf("want one panic entry, got %v", logs.All())
	}
	stack, _ := entries[0].ContextMap()["stack"].(string)
	if !strings.Contains(stack, "panickingHandler") {
		t.Errorf("logged stack does not name the panicking function:\n%s", stack)
	}
	if failed := logs.FilterMessage("gRPC request failed").All(); len(failed) != 1 || failed[0].ContextMap()["code"] != "Internal" {
		t.Errorf("want one failure entry with code Internal, got %v", failed)
	}
}

func panickingHandler(context.Context, any) (any, error) { panic("kaboom") }

// fakeStream is the smallest grpc.ServerStream the stream interceptor needs.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context { return s.ctx }

func TestStreamServerInterceptor(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc     string
		handler  grpc.StreamHandler
		wantCode codes.Code
	}{
		{desc: "success", handler: func(any, grpc.ServerStream) error { return nil }, wantCode: codes.OK},
		{desc: "error keeps its code", handler: func(any, grpc.ServerStream) error { return status.Error(codes.Canceled, "bye") }, wantCode: codes.Canceled},
		{desc: "panic becomes Internal", handler: func(any, grpc.ServerStream) error { panic("stream kaboom") }, wantCode: codes.Internal},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zapcore.DebugLevel)
			icpt := StreamServerInterceptor(zap.New(core))
			var seen Request
			handler := func(srv any, ss grpc.ServerStream) error {
				seen, _ = RequestFromContext(ss.Context())
				return test.handler(srv, ss)
			}
			err := icpt(nil, fakeStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: testMethod}, handler)
			if got := status.Code(err); got != test.wantCode {
				t.Fatalf("code = %v (err %v), want %v", got, err, test.wantCode)
			}
			if seen.Method != testMethod {
				t.Errorf("stream context request = %+v, want method %s", seen, testMethod)
			}
			if logs.FilterField(zap.String(MethodKey, testMethod)).Len() == 0 {
				t.Errorf("no entry carries the method field: %v", logs.All())
			}
		})
	}
}

// panicHealth panics on Check and blocks Watch until the client goes away.
type panicHealth struct {
	healthpb.UnimplementedHealthServer
}

func (panicHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	panic("health exploded")
}

func (panicHealth) Watch(_ *healthpb.HealthCheckRequest, ss healthpb.Health_WatchServer) error {
	if _, ok := RequestFromContext(ss.Context()); !ok {
		return status.Error(codes.FailedPrecondition, "no request in stream context")
	}
	panic("watch exploded")
}

// TestInterceptorsKeepRealServerAlive runs a real gRPC server on a unix
// socket and checks that handler panics reach the client as Internal and the
// server keeps answering.
func TestInterceptorsKeepRealServerAlive(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	logger := zap.New(core)
	sock := filepath.Join(t.TempDir(), "s.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(logger)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(logger)),
	)
	healthpb.RegisterHealthServer(srv, panicHealth{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	for i := range 2 {
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		if status.Code(err) != codes.Internal {
			t.Fatalf("call %d: Check error = %v, want Internal", i, err)
		}
	}
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Internal {
		t.Fatalf("Watch Recv error = %v, want Internal", err)
	}
	if n := logs.FilterMessage("panic in gRPC handler").Len(); n != 3 {
		t.Errorf("logged %d panics, want 3", n)
	}
}
