package prober

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

// probeOnce runs one liveness probe of the container against pod IP 127.0.0.1 with
// timeouts in units of 100ms.
func probeOnce(t *testing.T, c *v1.Container, podIP string) (Result, error, []string) {
	t.Helper()
	ev := &eventtest.Recorder{}
	p := newProber(nil, ev, zaptest.NewLogger(t))
	p.timeoutUnit = 100 * time.Millisecond
	got, err := p.probe(context.Background(), Liveness, testPod("u"), &v1.PodStatus{PodIP: podIP}, c, kubecontainer.ContainerID{Type: "docker", ID: "x"})
	return got, err, ev.Strings()
}

func hostPort(t *testing.T, rawURL string) (string, int) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return u.Hostname(), port
}

func newProbeHTTPServer(t *testing.T, tls bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "all good") })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "bad", http.StatusInternalServerError) })
	mux.HandleFunc("/redirect-same", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/fail", http.StatusFound)
	})
	mux.HandleFunc("/redirect-other", func(w http.ResponseWriter, r *http.Request) {
		_, port := hostPort(t, "http://"+r.Host)
		http.Redirect(w, r, "http://localhost:"+strconv.Itoa(port)+"/fail", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(10 * time.Second):
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Custom") != "v1" || r.Header.Get("User-Agent") != userAgent ||
			r.Header.Get("Accept") != "*/*" || r.Host != "example.test" || r.URL.RawQuery != "q=1" {
			http.Error(w, fmt.Sprintf("headers %v host %q query %q", r.Header, r.Host, r.URL.RawQuery), http.StatusBadRequest)
		}
	})
	var s *httptest.Server
	if tls {
		s = httptest.NewTLSServer(mux)
	} else {
		s = httptest.NewServer(mux)
	}
	t.Cleanup(s.Close)
	return s
}

func TestHTTPGetProbe(t *testing.T) {
	t.Parallel()
	plain := newProbeHTTPServer(t, false)
	secure := newProbeHTTPServer(t, true)
	host, port := hostPort(t, plain.URL)
	_, tlsPort := hostPort(t, secure.URL)

	for _, tc := range []struct {
		desc      string
		action    v1.HTTPGetAction
		podIP     string
		want      Result
		wantErr   bool
		wantEvent string
	}{
		{desc: "200 to the pod IP", action: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt(port)}, podIP: host, want: Success},
		{desc: "port by name", action: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("web")}, podIP: host, want: Success},
		{desc: "probe host overrides the pod IP", action: v1.HTTPGetAction{Host: host, Path: "/ok", Port: intstr.FromInt(port)}, podIP: "", want: Success},
		{desc: "https without verification", action: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt(tlsPort), Scheme: v1.URISchemeHTTPS}, podIP: host, want: Success},
		{
			desc: "500 fails", action: v1.HTTPGetAction{Path: "/fail", Port: intstr.FromInt(port)}, podIP: host,
			want: Failure, wantEvent: "Warning Unhealthy Liveness probe failed: HTTP probe failed with statuscode: 500",
		},
		{
			desc: "same-host redirect is followed", action: v1.HTTPGetAction{Path: "/redirect-same", Port: intstr.FromInt(port)}, podIP: host,
			want: Failure, wantEvent: "statuscode: 500",
		},
		{
			desc: "other-host redirect is not followed: success with a warning", action: v1.HTTPGetAction{Path: "/redirect-other", Port: intstr.FromInt(port)}, podIP: host,
			want: Success, wantEvent: "Warning ProbeWarning Liveness probe warning: Probe terminated redirects",
		},
		{
			desc: "redirect loop fails", action: v1.HTTPGetAction{Path: "/loop", Port: intstr.FromInt(port)}, podIP: host,
			want: Failure, wantEvent: "stopped after 10 redirects",
		},
		{
			desc: "timeout fails", action: v1.HTTPGetAction{Path: "/slow", Port: intstr.FromInt(port)}, podIP: host,
			want: Failure, wantEvent: "Liveness probe failed",
		},
		{
			desc: "headers, Host header and query", podIP: host, want: Success,
			action: v1.HTTPGetAction{Path: "/headers?q=1", Port: intstr.FromInt(port), HTTPHeaders: []v1.HTTPHeader{
				{Name: "X-Custom", Value: "v1"}, {Name: "Host", Value: "example.test"},
			}},
		},
		{
			desc: "connection refused fails", action: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt(closedPort(t))}, podIP: host,
			want: Failure, wantEvent: "connection refused",
		},
		{
			desc: "unknown port name errors", action: v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("nope")}, podIP: host,
			want: Failure, wantErr: true, wantEvent: "Liveness probe errored",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			action := tc.action
			c := &v1.Container{
				Name:          "c",
				Ports:         []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}},
				LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &action}, TimeoutSeconds: 10},
			}
			start := time.Now()
			got, err, evs := probeOnce(t, c, tc.podIP)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("probe = %v, %v; want %v (err %v); events %q", got, err, tc.want, tc.wantErr, evs)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("probe took %v, the timeout is 1s", d)
			}
			checkEvents(t, evs, tc.wantEvent)
		})
	}
}

// closedPort returns a 127.0.0.1 port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

func TestTCPSocketProbe(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	open := l.Addr().(*net.TCPAddr).Port

	for _, tc := range []struct {
		desc      string
		action    v1.TCPSocketAction
		podIP     string
		want      Result
		wantEvent string
	}{
		{desc: "open port on the pod IP", action: v1.TCPSocketAction{Port: intstr.FromInt(open)}, podIP: "127.0.0.1", want: Success},
		{desc: "open port by name", action: v1.TCPSocketAction{Port: intstr.FromString("tcp")}, podIP: "127.0.0.1", want: Success},
		{desc: "probe host", action: v1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt(open)}, want: Success},
		{
			desc: "closed port fails", action: v1.TCPSocketAction{Port: intstr.FromInt(closedPort(t))}, podIP: "127.0.0.1",
			want: Failure, wantEvent: "Warning Unhealthy Liveness probe failed: dial tcp",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			action := tc.action
			c := &v1.Container{
				Name:          "c",
				Ports:         []v1.ContainerPort{{Name: "tcp", ContainerPort: int32(open)}},
				LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &action}, TimeoutSeconds: 5},
			}
			got, err, evs := probeOnce(t, c, tc.podIP)
			if got != tc.want || err != nil {
				t.Fatalf("probe = %v, %v; want %v; events %q", got, err, tc.want, evs)
			}
			checkEvents(t, evs, tc.wantEvent)
		})
	}
}

func startGRPC(t *testing.T, withHealth bool) (int, *health.Server) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	if withHealth {
		healthpb.RegisterHealthServer(s, hs)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().(*net.TCPAddr).Port, hs
}

func TestGRPCProbe(t *testing.T) {
	t.Parallel()
	port, hs := startGRPC(t, true)
	hs.SetServingStatus("ready", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("notready", healthpb.HealthCheckResponse_NOT_SERVING)
	bare, _ := startGRPC(t, false)
	str := func(s string) *string { return &s }

	for _, tc := range []struct {
		desc      string
		action    v1.GRPCAction
		want      Result
		wantEvent string
	}{
		{desc: "overall status", action: v1.GRPCAction{Port: int32(port)}, want: Success},
		{desc: "serving service", action: v1.GRPCAction{Port: int32(port), Service: str("ready")}, want: Success},
		{
			desc: "not serving service", action: v1.GRPCAction{Port: int32(port), Service: str("notready")},
			want: Failure, wantEvent: `Liveness probe failed: service unhealthy (responded with "NOT_SERVING")`,
		},
		{
			desc: "unknown service", action: v1.GRPCAction{Port: int32(port), Service: str("other")},
			want: Failure, wantEvent: "health rpc probe failed",
		},
		{
			desc: "server without the health service", action: v1.GRPCAction{Port: int32(bare)},
			want: Failure, wantEvent: "does not implement the grpc health protocol",
		},
		{
			desc: "nothing listening", action: v1.GRPCAction{Port: int32(closedPort(t))},
			want: Failure, wantEvent: "failed to connect service",
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			action := tc.action
			c := &v1.Container{Name: "c", LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &action}, TimeoutSeconds: 10}}
			got, err, evs := probeOnce(t, c, "127.0.0.1")
			if got != tc.want || err != nil {
				t.Fatalf("probe = %v, %v; want %v; events %q", got, err, tc.want, evs)
			}
			checkEvents(t, evs, tc.wantEvent)
		})
	}
}

func TestGRPCProbeTimeout(t *testing.T) {
	t.Parallel()
	// A listener that accepts but never speaks HTTP/2: the call runs into the timeout.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
		}
	}()
	action := v1.GRPCAction{Port: int32(l.Addr().(*net.TCPAddr).Port)}
	c := &v1.Container{Name: "c", LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &action}, TimeoutSeconds: 2}}
	start := time.Now()
	got, err, evs := probeOnce(t, c, "127.0.0.1")
	if got != Failure || err != nil {
		t.Fatalf("probe = %v, %v; want Failure", got, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("probe took %v, the timeout is 200ms", d)
	}
	checkEvents(t, evs, "timeout: health rpc did not complete within 200ms")
}
