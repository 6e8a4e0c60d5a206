package kubeletserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "x"})
	reg.MustRegister(c)
	c.Inc()
	health := &fakeHealth{}
	pods := fakePods{{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}, Status: v1.PodStatus{Phase: v1.PodRunning}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Start(ctx, Options{Addr: "127.0.0.1:0", Health: health, Pods: pods, Gatherer: reg})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr()
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok" {
		t.Fatalf("healthz %d %q", code, body)
	}
	health.err = errors.New("PLEG is not healthy")
	if code, body := get(t, base+"/healthz"); code != 500 || !strings.Contains(body, "PLEG") {
		t.Fatalf("unhealthy healthz %d %q", code, body)
	}
	code, body := get(t, base+"/pods")
	var list v1.PodList
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 1 || list.Items[0].Status.Phase != v1.PodRunning {
		t.Fatalf("pods %d %q", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "test_total 1") {
		t.Fatalf("metrics %d %q", code, body)
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
}

func TestPodsLoopbackOnly(t *testing.T) {
	t.Parallel()
	h := NewHandler(Options{Health: fakeHealth{}, Pods: fakePods{}})
	req := httptest.NewRequest("GET", "/pods", nil)
	req.RemoteAddr = "192.0.2.7:5555"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Fatalf("remote /pods: %d", rec.Code)
	}
	if _, err := Start(context.Background(), Options{Addr: "127.0.0.1:0"}); err == nil {
		t.Fatal("Start without Health succeeded")
	}
}
