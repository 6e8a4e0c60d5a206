//go:build linux

package streaming

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// startDockerServer starts a streaming Server on the real Docker.
func startDockerServer(t *testing.T, d Docker) *Server {
	t.Helper()
	srv, err := New(Options{Docker: d, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return srv
}

// clientConfig is the config crictl uses for stream URLs.
func clientConfig() *rest.Config {
	return &rest.Config{TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

// spdyExecutor builds a remotecommand client for a stream URL, as crictl does.
func spdyExecutor(t *testing.T, rawURL string) remotecommand.Executor {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("parse URL %q: %v", rawURL, err)
	}
	e, err := remotecommand.NewSPDYExecutor(clientConfig(), http.MethodPost, u)
	if err != nil {
		t.Fatalf("NewSPDYExecutor: %v", err)
	}
	return e
}

func TestIntegrationServerExec(t *testing.T) {
	d := testDocker(t)
	id := sleeper(t)
	srv := startDockerServer(t, d)
	for _, tc := range []struct {
		desc       string
		cmd        []string
		wantCode   int // 0 means success
		wantStdout string
		wantStderr string
	}{
		{desc: "non-zero exit code", cmd: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, wantCode: 3, wantStdout: "out\n", wantStderr: "err\n"},
		{desc: "success", cmd: []string{"echo", "hello"}, wantStdout: "hello\n"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			resp, err := srv.GetExec(&runtimeapi.ExecRequest{ContainerId: id, Cmd: tc.cmd, Stdout: true, Stderr: true})
			if err != nil {
				t.Fatalf("GetExec: %v", err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			err = spdyExecutor(t, resp.Url).StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
			if got := exitStatus(t, err); got != tc.wantCode {
				t.Fatalf("exit code = %d; want %d", got, tc.wantCode)
			}
			if stdout.String() != tc.wantStdout || stderr.String() != tc.wantStderr {
				t.Fatalf("stdout %q, stderr %q; want %q, %q", stdout.String(), stderr.String(), tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

// exitStatus maps the client's stream error to an exit code.
func exitStatus(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return 0
	}
	var exitErr utilexec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("stream error %v carries no exit code", err)
	}
	return exitErr.ExitStatus()
}

// notifyBuffer is a goroutine-safe buffer that signals every write.
type notifyBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func newNotifyBuffer() *notifyBuffer { return &notifyBuffer{wrote: make(chan struct{}, 1)} }

func (b *notifyBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.wrote <- struct{}{}:
	default:
	}
	return n, err
}

func (b *notifyBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the buffer contains want.
func (b *notifyBuffer) waitFor(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for !strings.Contains(b.String(), want) {
		select {
		case <-b.wrote:
		case <-timer.C:
			t.Fatalf("output %q does not contain %q after %s", b.String(), want, timeout)
		}
	}
}

func TestIntegrationServerAttach(t *testing.T) {
	d := testDocker(t)
	id := runTestContainer(t, []string{"-i"}, "/bin/busybox", "cat")
	srv := startDockerServer(t, d)
	resp, err := srv.GetAttach(&runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatalf("GetAttach: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	stdout := newNotifyBuffer()
	streamDone := make(chan error, 1)
	go func() {
		streamDone <- spdyExecutor(t, resp.Url).StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdinR, Stdout: stdout, Stderr: io.Discard})
	}()
	if _, err := stdinW.Write([]byte("hi\n")); err != nil {
		t.Fatalf("write stdin: %v", err)
	}
	stdout.waitFor(t, "hi", 10*time.Second)
	cancel()
	select {
	case <-streamDone:
	case <-time.After(10 * time.Second):
		t.Fatal("attach client did not return after cancel")
	}
}

func TestIntegrationServerPortForward(t *testing.T) {
	d := testDocker(t)
	id := runTestContainer(t, nil, "/bin/busybox", "sh", "-c",
		"mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www")
	waitHTTPD(t, d, id)
	srv := startDockerServer(t, d)
	resp, err := srv.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: id, Port: []int32{8080}})
	if err != nil {
		t.Fatalf("GetPortForward: %v", err)
	}
	local := forwardPort(t, resp.Url, 8080)
	for i := range 2 { // each connection is a new stream pair
		reply := httpGet(t, "127.0.0.1:"+strconv.Itoa(local))
		if !strings.HasPrefix(reply, "HTTP/1.") || !strings.Contains(reply, "hello") {
			t.Fatalf("request %d through port-forward: reply %q; want an HTTP reply with %q", i, reply, "hello")
		}
	}
}

// forwardPort starts a client-go port forwarder (as crictl does) from a kernel-chosen
// local port on 127.0.0.1 to remote, and returns the local port.
func forwardPort(t *testing.T, rawURL string, remote int) int {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("parse URL %q: %v", rawURL, err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(clientConfig())
	if err != nil {
		t.Fatalf("RoundTripperFor: %v", err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	var errOut bytes.Buffer
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", remote)}, stop, ready, io.Discard, &errOut)
	if err != nil {
		t.Fatalf("portforward.New: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("port forwarder did not stop")
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("ForwardPorts: %v (%s)", err, errOut.String())
	case <-time.After(10 * time.Second):
		t.Fatal("port forwarder not ready after 10s")
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("GetPorts = %v, %v", ports, err)
	}
	return int(ports[0].Local)
}

// httpGet sends a minimal HTTP/1.0 request to addr and returns the raw reply.
func httpGet(t *testing.T, addr string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatalf("write request: %v", err)
	}
	reply, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	return string(reply)
}

// waitHTTPD waits until httpd answers inside the container.
func waitHTTPD(t *testing.T, d Docker, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var out bytes.Buffer
		code, err := Exec(t.Context(), d, ExecParams{ContainerID: id, Cmd: []string{"wget", "-q", "-O", "-", "http://127.0.0.1:8080/"}, Stdout: &out, Timeout: 5 * time.Second})
		if err == nil && code == 0 && strings.Contains(out.String(), "hello") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("httpd not ready after 10s: code %d, err %v, out %q", code, err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestIntegrationPortForwardDirect(t *testing.T) {
	d := testDocker(t)
	id := runTestContainer(t, nil, "/bin/busybox", "sh", "-c",
		"mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www")
	waitHTTPD(t, d, id)
	t.Run("reply after client half-close", func(t *testing.T) {
		stream := &halfStreamCloser{halfStream: halfStream{Reader: strings.NewReader("GET / HTTP/1.0\r\n\r\n")}}
		if err := portForward(t.Context(), d, id, 8080, stream); err != nil {
			t.Fatalf("portForward: %v", err)
		}
		if got := stream.out.String(); !strings.Contains(got, "hello") {
			t.Fatalf("reply %q does not contain %q", got, "hello")
		}
	})
	t.Run("closed port", func(t *testing.T) {
		stream := &halfStreamCloser{halfStream: halfStream{Reader: strings.NewReader("")}}
		err := portForward(t.Context(), d, id, 8081, stream)
		if err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("portForward to a closed port: %v; want connection refused", err)
		}
	})
}

// halfStreamCloser adds Close to halfStream.
type halfStreamCloser struct{ halfStream }

func (*halfStreamCloser) Close() error { return nil }
