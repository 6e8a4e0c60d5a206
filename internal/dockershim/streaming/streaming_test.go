package streaming

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remotecommand "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// fakeDocker fails every call it does not override; the embedded nil interface
// panics if an unexpected method is called.
type fakeDocker struct {
	Docker
	inspectContainer func(id string) (libdocker.ContainerJSON, error)
}

func (f *fakeDocker) InspectContainer(_ context.Context, id string) (libdocker.ContainerJSON, error) {
	return f.inspectContainer(id)
}

func TestOptionsWithDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		in       Options
		wantAddr string
		wantIdle time.Duration
	}{
		{desc: "zero options get defaults", in: Options{}, wantAddr: "127.0.0.1:0", wantIdle: 4 * time.Hour},
		{desc: "explicit values kept", in: Options{Addr: "0.0.0.0:10010", StreamIdleTimeout: time.Minute}, wantAddr: "0.0.0.0:10010", wantIdle: time.Minute},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got := tc.in.withDefaults()
			if got.Addr != tc.wantAddr || got.StreamIdleTimeout != tc.wantIdle || got.Logger == nil {
				t.Fatalf("withDefaults() = addr %q idle %s logger %v; want %q %s non-nil", got.Addr, got.StreamIdleTimeout, got.Logger, tc.wantAddr, tc.wantIdle)
			}
		})
	}
}

func TestNewValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		opts    Options
		wantErr string
	}{
		{desc: "valid", opts: Options{Docker: &fakeDocker{}}},
		{desc: "missing docker", opts: Options{}, wantErr: "Docker is required"},
		{desc: "bad addr", opts: Options{Docker: &fakeDocker{}, Addr: "nonsense"}, wantErr: "Addr"},
		{desc: "negative idle timeout", opts: Options{Docker: &fakeDocker{}, StreamIdleTimeout: -time.Second}, wantErr: "negative"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			_, err := New(tc.opts)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New error = %v; want ErrInvalidArgument mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	srv := startedServer(t)
	for _, tc := range []struct {
		desc    string
		call    func() error
		wantErr string // "" means valid
	}{
		{desc: "exec ok", call: func() error {
			_, err := srv.GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"true"}, Stdout: true})
			return err
		}},
		{desc: "exec nil", call: func() error { _, err := srv.GetExec(nil); return err }, wantErr: "nil"},
		{desc: "exec no container", call: func() error {
			_, err := srv.GetExec(&runtimeapi.ExecRequest{Cmd: []string{"true"}, Stdout: true})
			return err
		}, wantErr: "container_id"},
		{desc: "exec no cmd", call: func() error {
			_, err := srv.GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Stdout: true})
			return err
		}, wantErr: "cmd"},
		{desc: "exec tty with stderr", call: func() error {
			_, err := srv.GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"sh"}, Tty: true, Stderr: true})
			return err
		}, wantErr: "tty and stderr"},
		{desc: "exec no streams", call: func() error {
			_, err := srv.GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"sh"}})
			return err
		}, wantErr: "one of stdin"},
		{desc: "attach ok", call: func() error {
			_, err := srv.GetAttach(&runtimeapi.AttachRequest{ContainerId: "c", Stdin: true})
			return err
		}},
		{desc: "attach no container", call: func() error {
			_, err := srv.GetAttach(&runtimeapi.AttachRequest{Stdout: true})
			return err
		}, wantErr: "container_id"},
		{desc: "attach no streams", call: func() error {
			_, err := srv.GetAttach(&runtimeapi.AttachRequest{ContainerId: "c"})
			return err
		}, wantErr: "one of stdin"},
		{desc: "port-forward ok", call: func() error {
			_, err := srv.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "s", Port: []int32{80}})
			return err
		}},
		{desc: "port-forward no sandbox", call: func() error {
			_, err := srv.GetPortForward(&runtimeapi.PortForwardRequest{Port: []int32{80}})
			return err
		}, wantErr: "pod_sandbox_id"},
		{desc: "port-forward bad port", call: func() error {
			_, err := srv.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "s", Port: []int32{70000}})
			return err
		}, wantErr: "out of range"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.call()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v; want ErrInvalidArgument mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestExecParamsValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		p       ExecParams
		wantErr string
	}{
		{desc: "no container", p: ExecParams{Cmd: []string{"true"}}, wantErr: "container id"},
		{desc: "no cmd", p: ExecParams{ContainerID: "c"}, wantErr: "cmd"},
		{desc: "negative timeout", p: ExecParams{ContainerID: "c", Cmd: []string{"true"}, Timeout: -1}, wantErr: "timeout"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			// fakeDocker panics on any call: validation must come first.
			code, err := Exec(context.Background(), &fakeDocker{}, tc.p)
			if code != -1 || !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Exec = %d, %v; want -1 and ErrInvalidArgument mentioning %q", code, err, tc.wantErr)
			}
		})
	}
}

// startedServer returns a started Server on a fake Docker, closed at test end.
func startedServer(t *testing.T) *Server {
	t.Helper()
	srv, err := New(Options{Docker: &fakeDocker{}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func TestServerLifecycle(t *testing.T) {
	t.Parallel()
	srv, err := New(Options{Docker: &fakeDocker{}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	execReq := &runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"true"}, Stdout: true}
	if _, err := srv.GetExec(execReq); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("GetExec before Start = %v; want ErrNotStarted", err)
	}
	if srv.Addr() != "" {
		t.Fatalf("Addr before Start = %q; want empty", srv.Addr())
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := srv.Start(t.Context()); err == nil {
		t.Fatal("second Start succeeded")
	}
	addr := srv.Addr()
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr = %q; want 127.0.0.1 with a kernel-chosen port", addr)
	}
	checkURL(t, addr, "exec", func() (string, error) { r, err := srv.GetExec(execReq); return r.GetUrl(), err })
	checkURL(t, addr, "attach", func() (string, error) {
		r, err := srv.GetAttach(&runtimeapi.AttachRequest{ContainerId: "c", Stdout: true})
		return r.GetUrl(), err
	})
	checkURL(t, addr, "portforward", func() (string, error) {
		r, err := srv.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "s"})
		return r.GetUrl(), err
	})
	// An unknown token is answered by the library with 404.
	resp, err := http.Get("http://" + addr + "/exec/unknown")
	if err != nil {
		t.Fatalf("GET unknown token: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET unknown token: status %d; want 404", resp.StatusCode)
	}

	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := srv.GetExec(execReq); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("GetExec after Close = %v; want ErrNotStarted", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("listener still accepts after Close")
	}
	if err := srv.Start(t.Context()); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

func checkURL(t *testing.T, addr, method string, get func() (string, error)) {
	t.Helper()
	u, err := get()
	if err != nil {
		t.Fatalf("Get %s: %v", method, err)
	}
	prefix := "http://" + addr + "/" + method + "/"
	if !strings.HasPrefix(u, prefix) || len(u) == len(prefix) {
		t.Fatalf("%s URL = %q; want %s<token>", method, u, prefix)
	}
}

func TestServerStopsWithContext(t *testing.T) {
	t.Parallel()
	srv, err := New(Options{Docker: &fakeDocker{}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	if err := srv.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	addr := srv.Addr()
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := srv.GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"true"}, Stdout: true})
		if errors.Is(err, ErrNotStarted) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("server still running 5s after its context was cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("listener still accepts after the context was cancelled")
	}
}

func TestExitCodeErrorIsLibraryExitError(t *testing.T) {
	t.Parallel()
	var err error = &exitCodeError{code: 7}
	// The library uses a type assertion, not errors.As.
	exitErr, ok := err.(utilexec.ExitError)
	if !ok || !exitErr.Exited() || exitErr.ExitStatus() != 7 {
		t.Fatalf("exitCodeError does not act as utilexec.ExitError with status 7: %#v", err)
	}
}

func TestResizeLoop(t *testing.T) {
	t.Parallel()
	sizes := make(chan remotecommand.TerminalSize, 3)
	sizes <- remotecommand.TerminalSize{Width: 80, Height: 24}
	sizes <- remotecommand.TerminalSize{Width: 0, Height: 10} // ignored
	sizes <- remotecommand.TerminalSize{Width: 100, Height: 40}
	close(sizes)
	var got []string
	var errs int
	resize := func(h, w uint) error {
		got = append(got, fmt.Sprintf("%dx%d", h, w))
		return errors.New("boom")
	}
	resizeLoop(make(chan struct{}), sizes, resize, func(error) { errs++ })
	if strings.Join(got, ",") != "24x80,40x100" || errs != 2 {
		t.Fatalf("resizes = %v (errors %d); want [24x80 40x100] with 2 errors", got, errs)
	}
}

// halfStream is a client stream whose input ends (EOF) before its output.
type halfStream struct {
	io.Reader
	out bytes.Buffer
}

func (h *halfStream) Write(p []byte) (int, error) { return h.out.Write(p) }

func TestPipeHalfClose(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, _ := io.ReadAll(c) // returns once the client half-closed
		_, _ = c.Write(append([]byte("got:"), req...))
	}()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	stream := &halfStream{Reader: strings.NewReader("request")}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := pipe(ctx, conn, stream); err != nil {
		t.Fatalf("pipe: %v", err)
	}
	if got := stream.out.String(); got != "got:request" {
		t.Fatalf("reply = %q; want %q", got, "got:request")
	}
}

func TestPortForwardSandboxChecks(t *testing.T) {
	t.Parallel()
	// The embedded base struct has no alias in libdocker: build it the way Docker does.
	var stopped libdocker.ContainerJSON
	if err := json.Unmarshal([]byte(`{"Id":"s","State":{"Running":false,"Pid":0}}`), &stopped); err != nil {
		t.Fatalf("decode inspect: %v", err)
	}
	for _, tc := range []struct {
		desc    string
		sandbox string
		port    int32
		inspect func(string) (libdocker.ContainerJSON, error)
		wantErr string
		invalid bool
	}{
		{desc: "missing sandbox id", port: 80, wantErr: "sandbox id", invalid: true},
		{desc: "bad port", sandbox: "s", port: 0, wantErr: "out of range", invalid: true},
		{desc: "inspect fails", sandbox: "s", port: 80, wantErr: "not found",
			inspect: func(string) (libdocker.ContainerJSON, error) { return libdocker.ContainerJSON{}, libdocker.ErrNotFound }},
		{desc: "not running", sandbox: "s", port: 80, wantErr: "not running",
			inspect: func(string) (libdocker.ContainerJSON, error) { return stopped, nil }},
		{desc: "empty inspect", sandbox: "s", port: 80, wantErr: "not running",
			inspect: func(string) (libdocker.ContainerJSON, error) { return libdocker.ContainerJSON{}, nil }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			err := portForward(t.Context(), &fakeDocker{inspectContainer: tc.inspect}, tc.sandbox, tc.port, nil)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.Is(err, ErrInvalidArgument) != tc.invalid {
				t.Fatalf("portForward error = %v; want %q (invalid argument: %v)", err, tc.wantErr, tc.invalid)
			}
		})
	}
}
