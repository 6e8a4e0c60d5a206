package server

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
	"github.com/kubelet-dockershim/kubelet/internal/unixsock"
)

// testTimeout bounds every blocking step of a test.
const testTimeout = 10 * time.Second

func testOptions(t *testing.T, path string) Options {
	t.Helper()
	return Options{
		Endpoint: "unix://" + path,
		Runtime:  &fakeRuntime{},
		Image:    fakeImage{},
		Logger:   zaptest.NewLogger(t),
	}
}

// socketPath returns a fresh path in a temp dir. Unix socket paths are
// limited to 107 bytes, so it avoids t.TempDir's long names.
func socketPath(t *testing.T, parts ...string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "crisrv")
	if err != nil {
		t.Fatalf("MkdirTemp: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(append([]string{dir}, append(parts, "cri.sock")...)...)
}

// startServer starts a server and closes it when the test ends.
func startServer(t *testing.T, opts Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	// The server stops when its ctx ends; tests own its lifetime.
	srv, err := Start(context.WithoutCancel(ctx), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	select {
	case <-srv.Ready():
	case err := <-srv.Err():
		t.Fatalf("serving failed: %v", err)
	case <-ctx.Done():
		t.Fatal("server not ready in time")
	}
	return srv
}

func dial(t *testing.T, path string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
	)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func callVersion(t *testing.T, path string) (*runtimeapi.VersionResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	return runtimeapi.NewRuntimeServiceClient(dial(t, path)).Version(ctx, &runtimeapi.VersionRequest{Version: "v1"})
}

func mustVersion(t *testing.T, path string) {
	t.Helper()
	resp, err := callVersion(t, path)
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	if resp.GetRuntimeName() != fakeRuntimeName || resp.GetVersion() != "v1" {
		t.Fatalf("Version = %v, want runtime %s echoing v1", resp, fakeRuntimeName)
	}
}

func TestStartServesBothServices(t *testing.T) {
	t.Parallel()
	path := socketPath(t, "missing", "parent")
	srv := startServer(t, testOptions(t, path))
	if srv.Addr() != path {
		t.Errorf("Addr() = %q, want %q", srv.Addr(), path)
	}
	mustVersion(t, path)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	conn := dial(t, path)
	images, err := runtimeapi.NewImageServiceClient(conn).ListImages(ctx, &runtimeapi.ListImagesRequest{
		Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: "kib:2"}},
	})
	if err != nil || len(images.GetImages()) != 2 {
		t.Fatalf("ListImages = %d images, %v; want 2", len(images.GetImages()), err)
	}
	_, err = runtimeapi.NewRuntimeServiceClient(conn).ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("ListPodSandbox error = %v, want Unimplemented from the embedded server", err)
	}
}

func TestStartSocketMode(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	startServer(t, testOptions(t, path))
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("Lstat: %v", err)
	}
	if info.Mode().Type() != fs.ModeSocket {
		t.Errorf("%s is %v, want a socket", path, info.Mode())
	}
	if perm := info.Mode().Perm(); perm != 0o660 {
		t.Errorf("socket mode = %o, want 660", perm)
	}
}

func TestStartReplacesStaleSocket(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	stale, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatalf("ListenUnix: %v", err)
	}
	stale.SetUnlinkOnClose(false)
	if err := stale.Close(); err != nil {
		t.Fatalf("closing stale listener: %v", err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket file is gone before Start: %v", err)
	}
	startServer(t, testOptions(t, path))
	mustVersion(t, path)
}

func TestStartRefusesLiveSocket(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	other, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("Listen: %v", err)
	}
	t.Cleanup(func() { _ = other.Close() })

	srv, err := Start(context.Background(), testOptions(t, path))
	if err == nil {
		_ = srv.Close()
		t.Fatal("Start succeeded on a socket another listener serves")
	}
	if !errors.Is(err, unixsock.ErrSocketInUse) || !strings.Contains(err.Error(), "another process serves it") {
		t.Fatalf("Start error = %v, want unixsock.ErrSocketInUse", err)
	}
	// The other listener must be untouched: its file is there and it accepts.
	conn, err := net.DialTimeout("unix", path, testTimeout)
	if err != nil {
		t.Fatalf("the other listener no longer answers: %v", err)
	}
	_ = conn.Close()
}

func TestStartRefusesNonSocketFile(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	if _, err := Start(context.Background(), testOptions(t, path)); !errors.Is(err, unixsock.ErrNotSocket) {
		t.Fatalf("Start error = %v, want unixsock.ErrNotSocket", err)
	}
	if data, err := os.ReadFile(path); err != nil || string(data) != "keep me" {
		t.Fatalf("regular file was modified: %q, %v", data, err)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	t.Parallel()
	good := Options{Endpoint: "unix:///tmp/never-created.sock", Runtime: &fakeRuntime{}, Image: fakeImage{}}
	for _, test := range []struct {
		desc   string
		mutate func(*Options)
		want   error
	}{
		{desc: "tcp endpoint", mutate: func(o *Options) { o.Endpoint = "tcp://127.0.0.1:9999" }, want: ErrUnsupportedEndpoint},
		{desc: "relative endpoint", mutate: func(o *Options) { o.Endpoint = "unix://dockershim.sock" }, want: ErrUnsupportedEndpoint},
		{desc: "nil runtime", mutate: func(o *Options) { o.Runtime = nil }, want: ErrInvalidOptions},
		{desc: "nil image", mutate: func(o *Options) { o.Image = nil }, want: ErrInvalidOptions},
		{desc: "negative shutdown timeout", mutate: func(o *Options) { o.ShutdownTimeout = -time.Second }, want: ErrInvalidOptions},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			opts := good
			test.mutate(&opts)
			srv, err := Start(context.Background(), opts)
			if err == nil {
				_ = srv.Close()
			}
			if !errors.Is(err, test.want) {
				t.Fatalf("Start error = %v, want %v", err, test.want)
			}
		})
	}
	if _, err := os.Lstat("/tmp/never-created.sock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a rejected Start created its socket: %v", err)
	}
}

func TestCloseIsIdempotentAndRemovesSocket(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	srv := startServer(t, testOptions(t, path))
	mustVersion(t, path)

	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- srv.Close() }()
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close after Close: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file after Close: %v, want not exist", err)
	}
	select {
	case err := <-srv.Err():
		t.Errorf("Err() after Close received %v, want nothing", err)
	default:
	}
	if _, err := callVersion(t, path); status.Code(err) != codes.Unavailable {
		t.Errorf("Version after Close error = %v, want Unavailable", err)
	}
}

func TestContextCancelStopsServer(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := Start(ctx, testOptions(t, path))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	<-srv.Ready()
	mustVersion(t, path)
	cancel()

	deadline := time.Now().Add(testTimeout)
	for {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("socket still present after the Start context was cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close after context end: %v", err)
	}
}

func TestCloseCutsOffCallsAfterShutdownTimeout(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	runtime := &fakeRuntime{inStatus: make(chan struct{}, 1)}
	opts := testOptions(t, path)
	opts.Runtime = runtime
	opts.ShutdownTimeout = 200 * time.Millisecond
	srv := startServer(t, opts)

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	callErr := make(chan error, 1)
	go func() {
		_, err := runtimeapi.NewRuntimeServiceClient(dial(t, path)).Status(ctx, &runtimeapi.StatusRequest{})
		callErr <- err
	}()
	select {
	case <-runtime.inStatus:
	case <-ctx.Done():
		t.Fatal("Status call never reached the server")
	}

	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v with a hung call, want about the 200ms shutdown timeout", took)
	}
	if err := <-callErr; status.Code(err) != codes.Unavailable && status.Code(err) != codes.Canceled {
		t.Errorf("in-flight call error = %v, want Unavailable or Canceled", err)
	}
}

func TestLargeMessages(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	startServer(t, testOptions(t, path))
	client := runtimeapi.NewImageServiceClient(dial(t, path))
	for _, test := range []struct {
		desc     string
		kib      int
		padding  int // bytes added to the request
		wantCode codes.Code
	}{
		{desc: "10 MiB response", kib: 10 << 10, wantCode: codes.OK},
		{desc: "10 MiB request", kib: 1, padding: 10 << 20, wantCode: codes.OK},
		{desc: "17 MiB response exceeds the limit", kib: 17 << 10, wantCode: codes.ResourceExhausted},
		{desc: "17 MiB request exceeds the limit", kib: 1, padding: 17 << 20, wantCode: codes.ResourceExhausted},
	} {
		t.Run(test.desc, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			ref := "kib:" + strconv.Itoa(test.kib)
			if test.padding > 0 {
				ref += "|" + strings.Repeat("p", test.padding)
			}
			resp, err := client.ListImages(ctx, &runtimeapi.ListImagesRequest{
				Filter: &runtimeapi.ImageFilter{Image: &runtimeapi.ImageSpec{Image: ref}},
			})
			if got := status.Code(err); got != test.wantCode {
				t.Fatalf("ListImages code = %v (%v), want %v", got, err, test.wantCode)
			}
			if err == nil && len(resp.GetImages()) != test.kib {
				t.Fatalf("got %d images, want %d", len(resp.GetImages()), test.kib)
			}
		})
	}
}

func TestInterceptorOrder(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zapcore.DebugLevel)
	path := socketPath(t)
	opts := testOptions(t, path)
	opts.Logger = zap.New(core)
	seen := make(chan logging.Request, 1)
	opts.UnaryInterceptors = []grpc.UnaryServerInterceptor{
		func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			r, _ := logging.RequestFromContext(ctx)
			seen <- r
			return h(ctx, req)
		},
	}
	startServer(t, opts)
	mustVersion(t, path)

	const method = "/runtime.v1.RuntimeService/Version"
	if r := <-seen; r.Method != method || r.ID == "" {
		t.Errorf("extra interceptor saw request %+v, want method %s with an id (logging interceptor runs first)", r, method)
	}
	if logs.FilterField(zap.String(logging.MethodKey, method)).Len() == 0 {
		t.Errorf("logging interceptor logged nothing for %s: %v", method, logs.All())
	}
}

func TestErrReportsUnexpectedServeFailure(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	srv := startServer(t, testOptions(t, path))
	// Pull the listener out from under gRPC, as a fatal Accept error would.
	_ = srv.lis.Close()
	select {
	case err := <-srv.Err():
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("Err() = %v, want an error naming the socket", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("Err() received nothing after the listener failed")
	}
	if err := srv.Close(); err != nil {
		t.Errorf("Close after failure: %v", err)
	}
}
