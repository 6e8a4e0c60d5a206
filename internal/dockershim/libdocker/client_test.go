package libdocker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
)

// fakeDaemon serves a minimal Docker API on a unix socket, for fault injection.
func fakeDaemon(t *testing.T, pull http.HandlerFunc) string {
	t.Helper()
	return serveFake(t, "1.41", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/images/create") {
			pull(w, r)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"No such container: x"}`))
	})
}

func TestPullProgressDeadline(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		handler http.HandlerFunc
		want    error
		wantMsg string
	}{
		{"stalls after one message", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"status":"Pulling fs layer","id":"abc"}` + "\n"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, ErrPullStalled, ""},
		{"progress keeps it alive", func(w http.ResponseWriter, _ *http.Request) { // 1.5 s in all
			for i := 0; i < 15; i++ {
				fmt.Fprintf(w, `{"status":"Downloading","id":"abc","progress":"%d"}`+"\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(100 * time.Millisecond)
			}
		}, nil, ""},
		{"error in stream", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"error":"manifest unknown: manifest unknown"}` + "\n"))
		}, ErrNotFound, "manifest unknown"},
		{"auth error in stream", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"error":"unauthorized: authentication required"}` + "\n"))
		}, nil, "unauthorized"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c, err := New(Options{Endpoint: fakeDaemon(t, tc.handler), PullProgressDeadline: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = c.PullImage(context.Background(), "example/img:1", &AuthConfig{Username: "u", Password: "p"})
			switch {
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("err = %v, want %v", err, tc.want)
			case tc.want == nil && tc.wantMsg == "" && err != nil:
				t.Fatalf("err = %v", err)
			case tc.wantMsg != "" && (err == nil || !strings.Contains(err.Error(), tc.wantMsg)):
				t.Fatalf("err = %v, want %q", err, tc.wantMsg)
			}
			if time.Since(start) > 5*time.Second {
				t.Fatalf("pull took %s", time.Since(start))
			}
		})
	}
}

func TestNotFoundSentinel(t *testing.T) {
	t.Parallel()
	c, err := New(Options{Endpoint: fakeDaemon(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.InspectContainer(context.Background(), "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if _, err := New(Options{}); err == nil {
		t.Fatal("New without endpoint succeeded")
	}
}

// TestMain runs the package's tests against the host's dockerd, or a private
// daemon of the engine $DOCKERSHIM_TEST_DOCKER names (dockerd.RunMain).
func TestMain(m *testing.M) { os.Exit(dockerd.RunMain(m, testBusybox)) }

// TestIntegrationNegotiatesAPIVersion: against the real dockerd the client speaks the
// daemon's API version (1.41 for Debian's docker.io 20.10, 1.45 for 26.1), not
// its own newer one.
func TestIntegrationNegotiatesAPIVersion(t *testing.T) {
	out, err := exec.Command("docker", "version", "--format", "{{.Server.APIVersion}}").Output()
	if err != nil {
		t.Fatalf("dockerd is required: %v", err)
	}
	c, err := New(Options{Endpoint: dockerd.Endpoint()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := c.APIVersion(), strings.TrimSpace(string(out)); got != want {
		t.Fatalf("negotiated API %s, daemon speaks %s", got, want)
	}
	if _, err := c.InspectImage(context.Background(), "kubelet-dockershim/no-such-image:0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("inspect missing image: %v, want ErrNotFound", err)
	}
}

// StopContainer inspects the container after the stop: the inspect waits for
// the daemon's exit handler, so the list is up to date when it returns. A
// failed stop is not followed by an inspect, and a failed inspect does not fail
// the stop.
func TestStopContainerInspectsAfterStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc              string
		stopCode, inspect int
		wantCalls         []string
		wantErr           error
	}{
		{"stopped", http.StatusNoContent, http.StatusOK, []string{"stop", "json"}, nil},
		{"inspect fails", http.StatusNoContent, http.StatusInternalServerError, []string{"stop", "json"}, nil},
		{"stop fails", http.StatusNotFound, http.StatusOK, []string{"stop"}, ErrNotFound},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var calls []string
			endpoint := serveFake(t, "1.45", func(w http.ResponseWriter, r *http.Request) {
				op := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
				mu.Lock()
				calls = append(calls, op)
				mu.Unlock()
				code := tc.inspect
				if op == "stop" {
					code = tc.stopCode
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(code)
				switch {
				case code == http.StatusNotFound:
					_, _ = w.Write([]byte(`{"message":"No such container: c1"}`))
				case code >= 400:
					_, _ = w.Write([]byte(`{"message":"boom"}`))
				case op == "json":
					_, _ = w.Write([]byte(`{"Id":"c1","State":{"Status":"exited"}}`))
				}
			})
			c, err := New(Options{Endpoint: endpoint})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.StopContainer(context.Background(), "c1", time.Second)
			if (tc.wantErr == nil && err != nil) || (tc.wantErr != nil && !errors.Is(err, tc.wantErr)) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			mu.Lock()
			defer mu.Unlock()
			if strings.Join(calls, ",") != strings.Join(tc.wantCalls, ",") {
				t.Fatalf("calls = %v, want %v", calls, tc.wantCalls)
			}
		})
	}
}

// serveFake serves handler, and /_ping answering apiVersion, on a unix socket.
func serveFake(t *testing.T, apiVersion string, handler http.HandlerFunc) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "fdk")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/_ping", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Api-Version", apiVersion)
		_, _ = w.Write([]byte("OK"))
	})
	mux.HandleFunc("/", handler)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close(); _ = os.RemoveAll(dir) })
	return "unix://" + sock
}
