//go:build linux

package streaming

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/streamtest"
)

// The end-to-end tests (internal/e2e) drive the server over SPDY like crictl;
// these tests call the server's Runtime directly on the real Docker.

// testRuntime is the Runtime the server hands to the streaming library.
func testRuntime(t *testing.T, d Docker) *criRuntime {
	t.Helper()
	return &criRuntime{docker: d, logger: zaptest.NewLogger(t), base: t.Context()}
}

// nopWriteCloser adds a no-op Close to a writer.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func TestIntegrationRuntimeExec(t *testing.T) {
	d := testDocker(t)
	id := sleeper(t)
	rt := testRuntime(t, d)
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
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			err := rt.Exec(ctx, id, tc.cmd, nil, nopWriteCloser{&stdout}, nopWriteCloser{&stderr}, false, nil)
			if got := streamtest.ExitStatus(t, err); got != tc.wantCode {
				t.Fatalf("exit code = %d; want %d", got, tc.wantCode)
			}
			if stdout.String() != tc.wantStdout || stderr.String() != tc.wantStderr {
				t.Fatalf("stdout %q, stderr %q; want %q, %q", stdout.String(), stderr.String(), tc.wantStdout, tc.wantStderr)
			}
		})
	}
}

func TestIntegrationRuntimeAttach(t *testing.T) {
	d := testDocker(t)
	id := runTestContainer(t, []string{"-i"}, "/bin/busybox", "cat")
	rt := testRuntime(t, d)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	stdout := streamtest.NewBuffer()
	done := make(chan error, 1)
	go func() {
		done <- rt.Attach(ctx, id, stdinR, nopWriteCloser{stdout}, nopWriteCloser{io.Discard}, false, nil)
	}()
	if _, err := stdinW.Write([]byte("hi\n")); err != nil {
		t.Fatalf("write stdin: %v", err)
	}
	stdout.WaitFor(t, "hi", 10*time.Second)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Attach after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Attach did not return after cancel")
	}
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
