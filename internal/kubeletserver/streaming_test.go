package kubeletserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	clientpf "k8s.io/client-go/tools/portforward"
	clientrc "k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// echoRuntime is the streaming runtime behind the fake upgrade server: exec
// "cat" echoes stdin, "fail" writes to both streams and exits 3, anything
// else prints its arguments; attach greets then echoes; port-forward prefixes
// what it reads with the port.
type echoRuntime struct{}

func (echoRuntime) Exec(_ context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
	switch cmd[0] {
	case "cat":
		_, err := io.Copy(out, in)
		return err
	case "fail":
		fmt.Fprint(out, "out\n")
		fmt.Fprint(errw, "err\n")
		return utilexec.CodeExitError{Err: errors.New("command terminated with exit code 3"), Code: 3}
	}
	_, err := fmt.Fprintf(out, "%s in %s\n", strings.Join(cmd, " "), id)
	return err
}

func (echoRuntime) Attach(_ context.Context, id string, in io.Reader, out, _ io.WriteCloser, _ bool, _ <-chan remotecommand.TerminalSize) error {
	fmt.Fprintf(out, "attached to %s\n", id)
	_, err := io.Copy(out, in)
	return err
}

func (echoRuntime) PortForward(_ context.Context, sandbox string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	line, err := bufio.NewReader(stream).ReadString('\n')
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stream, "%s:%d %s", sandbox, port, line)
	return err
}

// startUpgradeBackend runs a cri-streaming server (the runtime side) on
// loopback and returns it.
func startUpgradeBackend(t *testing.T) streaming.Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := streaming.DefaultConfig
	cfg.Addr = ln.Addr().String()
	srv, err := streaming.NewServer(cfg, echoRuntime{})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return srv
}

// startStreamingAPI starts the kubelet API over TLS with a host whose
// streaming URLs come from backend, and returns a client config for it.
func startStreamingAPI(t *testing.T, backend streaming.Server) (*rest.Config, string) {
	t.Helper()
	host := &fakeHost{pods: []*v1.Pod{testPod()}, stream: func(c hostCall) (*url.URL, error) {
		var raw string
		switch c.method {
		case "exec":
			resp, err := backend.GetExec(&runtimeapi.ExecRequest{ContainerId: "cid-" + c.container, Cmd: c.cmd,
				Stdin: c.stream.Stdin, Stdout: c.stream.Stdout, Stderr: c.stream.Stderr, Tty: c.stream.TTY})
			if err != nil {
				return nil, err
			}
			raw = resp.Url
		case "attach":
			resp, err := backend.GetAttach(&runtimeapi.AttachRequest{ContainerId: "cid-" + c.container,
				Stdin: c.stream.Stdin, Stdout: c.stream.Stdout, Stderr: c.stream.Stderr})
			if err != nil {
				return nil, err
			}
			raw = resp.Url
		case "portforward":
			resp, err := backend.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "sb-" + c.pod, Port: c.ports})
			if err != nil {
				return nil, err
			}
			raw = resp.Url
		}
		return url.Parse(raw)
	}}
	return serveTestAPI(t, testAPIOptions(host))
}

// serveTestAPI serves opts on a free 127.0.0.1 port with a fresh certificate,
// no authentication filter and a test logger until the test ends, and returns
// a client config (no verification) and the base URL.
func serveTestAPI(t *testing.T, opts APIOptions) (*rest.Config, string) {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	opts.TLSConfig = selfSignedTLS(t)
	opts.Filter = func(next http.Handler) http.Handler { return next }
	opts.Logger = zaptest.NewLogger(t)
	s, err := StartAPI(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	base := "https://" + s.Addr()
	return &rest.Config{Host: base, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, base
}

// executors builds the SPDY and the WebSocket (v5) executor for a URL.
func executors(t *testing.T, cfg *rest.Config, rawURL string) map[string]clientrc.Executor {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	spdyExec, err := clientrc.NewSPDYExecutor(cfg, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	wsExec, err := clientrc.NewWebSocketExecutor(cfg, "GET", rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]clientrc.Executor{"spdy": spdyExec, "websocket": wsExec}
}

func exitCode(err error) int {
	var exit utilexec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitStatus()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestStreamingProxyExecAndAttach(t *testing.T) {
	t.Parallel()
	cfg, base := startStreamingAPI(t, startUpgradeBackend(t))
	tests := []struct {
		desc       string
		path       string
		stdin      string
		wantStdout string
		wantStderr string
		wantExit   int
	}{
		{desc: "exec with stdin", path: "/exec/default/web/app?command=cat&input=1&output=1&error=1", stdin: "hello\n", wantStdout: "hello\n"},
		{desc: "exec exit code", path: "/exec/default/web/app?command=fail&output=1&error=1", wantStdout: "out\n", wantStderr: "err\n", wantExit: 3},
		{desc: "exec arguments", path: "/exec/default/web/app?command=echo&command=a+b&output=1", wantStdout: "echo a b in cid-app\n"},
		{desc: "exec with the uid path", path: "/exec/default/web/uid-web/app?command=echo&output=1", wantStdout: "echo in cid-app\n"},
		{desc: "attach", path: "/attach/default/web/app?input=1&output=1", stdin: "typed\n", wantStdout: "attached to cid-app\ntyped\n"},
	}
	for _, tc := range tests {
		for proto, exec := range executors(t, cfg, base+tc.path) {
			t.Run(tc.desc+" over "+proto, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				var stdout, stderr bytes.Buffer
				opts := clientrc.StreamOptions{Stdout: &stdout}
				if strings.Contains(tc.path, "error=1") {
					opts.Stderr = &stderr
				}
				if strings.Contains(tc.path, "input=1") {
					opts.Stdin = strings.NewReader(tc.stdin)
				}
				err := exec.StreamWithContext(ctx, opts)
				if got := exitCode(err); got != tc.wantExit {
					t.Fatalf("exit code %d (%v); want %d", got, err, tc.wantExit)
				}
				if stdout.String() != tc.wantStdout || stderr.String() != tc.wantStderr {
					t.Fatalf("stdout %q stderr %q; want %q %q", stdout.String(), stderr.String(), tc.wantStdout, tc.wantStderr)
				}
			})
		}
	}
}

func TestStreamingProxyRefusals(t *testing.T) {
	t.Parallel()
	cfg, base := startStreamingAPI(t, startUpgradeBackend(t))
	for _, path := range []string{"/exec/default/nope/app?command=ls&output=1", "/exec/default/web/nope?command=ls&output=1"} {
		for proto, exec := range executors(t, cfg, base+path) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := exec.StreamWithContext(ctx, clientrc.StreamOptions{Stdout: io.Discard})
			cancel()
			if err == nil || !strings.Contains(err.Error(), "404") && !strings.Contains(err.Error(), "not found") && !strings.Contains(err.Error(), "does not exist") {
				t.Errorf("%s over %s: %v; want a 404", path, proto, err)
			}
		}
	}
}

func TestStreamingProxyPortForward(t *testing.T) {
	t.Parallel()
	cfg, base := startStreamingAPI(t, startUpgradeBackend(t))
	u, err := url.Parse(base + "/portForward/default/web")
	if err != nil {
		t.Fatal(err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u)
	wsDialer, err := clientpf.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for proto, dialer := range map[string]httpstream.Dialer{"spdy": spdyDialer, "websocket tunnel": wsDialer} {
		t.Run(proto, func(t *testing.T) {
			local := forward(t, dialer, 8080)
			for i := range 2 { // every connection is a new stream pair
				reply := roundTrip(t, fmt.Sprintf("127.0.0.1:%d", local), fmt.Sprintf("ping %d\n", i))
				if want := fmt.Sprintf("sb-web:8080 ping %d\n", i); reply != want {
					t.Fatalf("reply %q; want %q", reply, want)
				}
			}
		})
	}
}

// forward starts a port-forward to the pod's port through dialer and returns
// the local port; it stops at test end.
func forward(t *testing.T, dialer httpstream.Dialer, port int) uint16 {
	t.Helper()
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := clientpf.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward ended: %v", err)
	case <-time.After(15 * time.Second):
		t.Fatal("port-forward not ready")
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("forwarded ports %v, %v", ports, err)
	}
	return ports[0].Local
}

// roundTrip writes msg to addr and reads one line back.
func roundTrip(t *testing.T, addr, msg string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("read the reply: %v (got %q)", err, line)
	}
	return line
}
