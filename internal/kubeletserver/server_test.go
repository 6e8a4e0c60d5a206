package kubeletserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeHealth struct{ err error }

func (f fakeHealth) Healthz() error { return f.err }

type fakePods []v1.Pod

func (f fakePods) Pods() []v1.Pod { return f }

func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHealthzServerServesHealthzOnly(t *testing.T) {
	t.Parallel()
	health := &fakeHealth{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Start(ctx, Options{Addr: "127.0.0.1:0", Health: health})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr()
	if code, body := get(t, http.DefaultClient, base+"/healthz"); code != 200 || body != "ok" {
		t.Fatalf("healthz %d %q", code, body)
	}
	health.err = errors.New("PLEG is not healthy")
	if code, body := get(t, http.DefaultClient, base+"/healthz"); code != 500 || !strings.Contains(body, "PLEG") {
		t.Fatalf("unhealthy healthz %d %q", code, body)
	}
	// As upstream's healthz port: the pod list and the metrics are not served
	// to whoever reaches the port.
	for _, path := range []string{"/pods", "/metrics", "/metrics/resource", "/stats/summary", "/configz", "/"} {
		if code, _ := get(t, http.DefaultClient, base+path); code != http.StatusNotFound {
			t.Errorf("GET %s on the healthz port: %d, want 404", path, code)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal("second close:", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("server still answers after Close")
	}
	if _, err := Start(context.Background(), Options{Addr: "127.0.0.1:0"}); err == nil {
		t.Fatal("Start without Health succeeded")
	}
}

// unixClient is an HTTP client that dials the unix socket path.
func unixClient(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
}

func TestLocalSocket(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "x"})
	reg.MustRegister(c)
	c.Inc()
	pods := fakePods{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Status: v1.PodStatus{Phase: v1.PodRunning}}}
	dir := filepath.Join(t.TempDir(), "root")
	path := filepath.Join(dir, "kubelet-local.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := StartLocal(ctx, LocalOptions{Path: path, Health: fakeHealth{}, Pods: pods, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode().Type() != os.ModeSocket {
		t.Errorf("socket mode %v, want a socket 0600", fi.Mode())
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("created socket directory: %v %v, want 0700", di.Mode(), err)
	}
	client := unixClient(path)
	if code, body := get(t, client, "http://local/healthz"); code != 200 || body != "ok" {
		t.Fatalf("healthz %d %q", code, body)
	}
	code, body := get(t, client, "http://local/pods")
	var list v1.PodList
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 1 || list.Items[0].Status.Phase != v1.PodRunning {
		t.Fatalf("pods %d %q", code, body)
	}
	if code, body := get(t, client, "http://local/metrics"); code != 200 || !strings.Contains(body, "test_total 1") {
		t.Fatalf("metrics %d %q", code, body)
	}
	// A second kubelet on the same root dir must not take the live socket.
	if _, err := StartLocal(ctx, LocalOptions{Path: path, Health: fakeHealth{}}); err == nil || !strings.Contains(err.Error(), "another process serves it") {
		t.Fatalf("second StartLocal on a live socket: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left after Close: %v", err)
	}
	if _, err := StartLocal(ctx, LocalOptions{Path: path}); err == nil {
		t.Fatal("StartLocal without Health succeeded")
	}
}
