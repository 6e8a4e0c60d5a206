package libdocker

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestStoppingDaemonRefusesRequests: a stopping dockerd closes its listener but
// keeps serving the connections already open while it stops its containers. The
// client must not reach it through such a connection: after the listener is
// closed, a call fails instead of creating objects in a daemon about to exit.
func TestStoppingDaemonRefusesRequests(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "sdk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false) // dockerd leaves its socket file
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Api-Version", "1.41")
		_, _ = w.Write([]byte("OK"))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	c, err := New(Options{Endpoint: "unix://" + sock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if err := c.StartContainer(ctx, "abc"); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	// The daemon starts stopping: no new connections; open ones still served
	// (http.Server.Serve returning does not close them).
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.StartContainer(ctx, "abc"); err == nil {
		t.Fatal("StartContainer after the daemon closed its listener succeeded: the call went over a kept-alive connection")
	}
	if _, err := c.CreateContainer(ctx, "x", &ContainerConfig{Image: "i"}, &HostConfig{}); err == nil {
		t.Fatal("CreateContainer after the daemon closed its listener succeeded: the call went over a kept-alive connection")
	}
}
