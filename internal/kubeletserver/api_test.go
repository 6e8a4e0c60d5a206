package kubeletserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// gatherer returns a registry with one counter named name.
func gatherer(name string) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: "test"})
	c.Inc()
	reg.MustRegister(c)
	return reg
}

// testAPIOptions wires every endpoint to fakes.
func testAPIOptions(host *fakeHost) APIOptions {
	return APIOptions{
		Host:            host,
		Health:          fakeHealth{},
		Gatherer:        gatherer("kubelet_test_total"),
		ResourceMetrics: gatherer("resource_test_total"),
		ProbeMetrics:    gatherer("prober_test_total"),
		Stats: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "stats at "+r.URL.Path)
		}),
		CadvisorMetrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "container_scrape_error 0\n")
		}),
		Configz: func() any { return map[string]any{"kubeletconfig": map[string]any{"maxPods": 110}} },
	}
}

func serveAPI(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

func TestAPIEndpoints(t *testing.T) {
	t.Parallel()
	host := &fakeHost{pods: []*v1.Pod{testPod()}, running: []*v1.Pod{testPod()}, logs: "a log line\n"}
	h, err := NewAPIHandler(testAPIOptions(host))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc     string
		method   string
		target   string
		wantCode int
		wantBody string // substring
	}{
		{desc: "healthz", method: "GET", target: "/healthz", wantCode: 200, wantBody: "ok"},
		{desc: "pods", method: "GET", target: "/pods", wantCode: 200, wantBody: `"kind":"PodList"`},
		{desc: "running pods", method: "GET", target: "/runningpods/", wantCode: 200, wantBody: `"name":"web"`},
		{desc: "running pods without slash", method: "GET", target: "/runningpods", wantCode: 200, wantBody: `"uid":"uid-web"`},
		{desc: "metrics", method: "GET", target: "/metrics", wantCode: 200, wantBody: "kubelet_test_total 1"},
		{desc: "resource metrics", method: "GET", target: "/metrics/resource", wantCode: 200, wantBody: "resource_test_total 1"},
		{desc: "cadvisor metrics", method: "GET", target: "/metrics/cadvisor", wantCode: 200, wantBody: "container_scrape_error 0"},
		{desc: "probe metrics", method: "GET", target: "/metrics/probes", wantCode: 200, wantBody: "prober_test_total 1"},
		{desc: "stats", method: "GET", target: "/stats/summary?only_cpu_and_memory=true", wantCode: 200, wantBody: "stats at /stats/summary"},
		{desc: "configz", method: "GET", target: "/configz", wantCode: 200, wantBody: `{"kubeletconfig":{"maxPods":110}}`},
		{desc: "pprof index", method: "GET", target: "/debug/pprof/", wantCode: 200, wantBody: "goroutine"},
		{desc: "pprof goroutine", method: "GET", target: "/debug/pprof/goroutine?debug=1", wantCode: 200, wantBody: "goroutine profile"},
		{desc: "pprof cmdline", method: "GET", target: "/debug/pprof/cmdline", wantCode: 200},
		{desc: "container logs", method: "GET", target: "/containerLogs/default/web/app", wantCode: 200, wantBody: "a log line"},
		{desc: "init container logs", method: "GET", target: "/containerLogs/default/web/init", wantCode: 200},
		{desc: "ephemeral container logs", method: "GET", target: "/containerLogs/default/web/debug", wantCode: 200},
		{desc: "logs of an unknown pod", method: "GET", target: "/containerLogs/default/nope/app", wantCode: 404, wantBody: "does not exist"},
		{desc: "logs of an unknown container", method: "GET", target: "/containerLogs/default/web/nope", wantCode: 404, wantBody: "not found"},
		{desc: "logs with a bad namespace", method: "GET", target: "/containerLogs/Default_/web/app", wantCode: 400, wantBody: "namespace"},
		{desc: "logs with an encoded slash", method: "GET", target: "/containerLogs/default/web%2F..%2Fx/app", wantCode: 400},
		{desc: "logs with a dot-dot pod", method: "GET", target: "/containerLogs/default/../web/app", wantCode: 400, wantBody: "dot segments"},
		{desc: "logs with an encoded dot-dot", method: "GET", target: "/containerLogs/default/%2e%2e/%2e%2e/etc/passwd", wantCode: 400},
		{desc: "logs with a bad container", method: "GET", target: "/containerLogs/default/web/App", wantCode: 400, wantBody: "container name"},
		{desc: "logs by POST", method: "POST", target: "/containerLogs/default/web/app", wantCode: 405},
		{desc: "logs with a bad tailLines", method: "GET", target: "/containerLogs/default/web/app?tailLines=x", wantCode: 400},
		{desc: "logs with a negative tailLines", method: "GET", target: "/containerLogs/default/web/app?tailLines=-1", wantCode: 422},
		{desc: "run", method: "POST", target: "/run/default/web/app?cmd=ls+-l", wantCode: 200, wantBody: "ran"},
		{desc: "run with uid", method: "POST", target: "/run/default/web/uid-web/app?cmd=ls", wantCode: 200},
		{desc: "run with a bad uid", method: "POST", target: "/run/default/web/uid:web/app?cmd=ls", wantCode: 400, wantBody: "UID"},
		{desc: "run by GET", method: "GET", target: "/run/default/web/app?cmd=ls", wantCode: 405},
		{desc: "exec without an upgrade", method: "GET", target: "/exec/default/web/app?command=ls&output=1", wantCode: 400, wantBody: "Upgrade request required"},
		{desc: "exec without streams", method: "POST", target: "/exec/default/web/app?command=ls", wantCode: 400, wantBody: "at least 1 of stdin, stdout, stderr"},
		{desc: "exec in an unknown pod", method: "POST", target: "/exec/default/nope/app?command=ls&output=1", wantCode: 404},
		{desc: "exec in an unknown container", method: "POST", target: "/exec/default/web/nope?command=ls&output=1", wantCode: 404},
		{desc: "attach with a bad pod name", method: "POST", target: "/attach/default/-web/app?output=1", wantCode: 400},
		{desc: "port-forward without an upgrade", method: "POST", target: "/portForward/default/web", wantCode: 400, wantBody: "Upgrade request required"},
		{desc: "port-forward to an unknown pod", method: "POST", target: "/portForward/default/nope", wantCode: 404},
		{desc: "checkpoint", method: "POST", target: "/checkpoint/default/web/app?timeout=5", wantCode: 200, wantBody: `{"items":["/var/lib/kubelet/checkpoints/x.tar"]}`},
		{desc: "checkpoint with a bad timeout", method: "POST", target: "/checkpoint/default/web/app?timeout=soon", wantCode: 400},
		{desc: "unknown path", method: "GET", target: "/nope", wantCode: 404},
		{desc: "node logs not configured", method: "GET", target: "/logs/", wantCode: 404},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			rec := serveAPI(t, h, tc.method, tc.target)
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Fatalf("%s %s: %d %q; want %d with %q", tc.method, tc.target, rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
		})
	}
	// The host saw the parsed request.
	var sawRun, sawCheckpoint bool
	for _, c := range host.recorded() {
		switch {
		case c.method == "run" && c.uid == "" && strings.Join(c.cmd, "|") == "ls|-l" && c.container == "app":
			sawRun = true
		case c.method == "checkpoint" && c.timeout == 5 && c.namespace == "default" && c.pod == "web":
			sawCheckpoint = true
		}
	}
	if !sawRun || !sawCheckpoint {
		t.Fatalf("host calls %+v; want the run and checkpoint requests", host.recorded())
	}
}

func TestAPIHostErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc     string
		err      error
		method   string
		target   string
		wantCode int
	}{
		{desc: "logs: not found", err: notFound("x"), method: "GET", target: "/containerLogs/default/web/app", wantCode: 404},
		{desc: "logs: bad request", err: apierrors.NewBadRequest(`container "app" is waiting to start`), method: "GET", target: "/containerLogs/default/web/app", wantCode: 400},
		{desc: "logs: other errors are 400 as upstream", err: errors.New("boom"), method: "GET", target: "/containerLogs/default/web/app", wantCode: 400},
		{desc: "exec: container not running", err: notFound("x"), method: "POST", target: "/exec/default/web/app?command=ls&output=1", wantCode: 404},
		{desc: "exec: runtime NotFound", err: grpcstatus.Error(codes.NotFound, "no such container"), method: "POST", target: "/exec/default/web/app?command=ls&output=1", wantCode: 404},
		{desc: "exec: too many in flight", err: grpcstatus.Error(codes.ResourceExhausted, "max in flight"), method: "POST", target: "/exec/default/web/app?command=ls&output=1", wantCode: 429},
		{desc: "attach: runtime failure", err: errors.New("boom"), method: "POST", target: "/attach/default/web/app?output=1", wantCode: 500},
		{desc: "port-forward: other UID", err: notFound("x"), method: "POST", target: "/portForward/default/web/uid-other", wantCode: 404},
		{desc: "checkpoint: unimplemented", err: grpcstatus.Error(codes.Unimplemented, "no CRIU"), method: "POST", target: "/checkpoint/default/web/app", wantCode: 501},
		{desc: "run: exit code", err: errors.New("exit 1"), method: "POST", target: "/run/default/web/app?cmd=false", wantCode: 500},
		{desc: "running pods: runtime down", err: errors.New("runtime down"), method: "GET", target: "/runningpods/", wantCode: 500},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			h, err := NewAPIHandler(testAPIOptions(&fakeHost{pods: []*v1.Pod{testPod()}, err: tc.err}))
			if err != nil {
				t.Fatal(err)
			}
			rec := serveAPI(t, h, tc.method, tc.target)
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.err.Error()) && tc.wantCode != 404 {
				t.Fatalf("%d %q; want %d with %q", rec.Code, rec.Body.String(), tc.wantCode, tc.err)
			}
		})
	}
}

func TestContainerLogsQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc       string
		query      string
		wantCode   int
		wantBody   string
		check      func(o *v1.PodLogOptions) bool
		wantLogged bool
	}{
		{desc: "defaults", query: "", wantCode: 200, wantBody: "out\nerr\n", check: func(o *v1.PodLogOptions) bool {
			return !o.Follow && !o.Previous && !o.Timestamps && o.TailLines == nil && o.LimitBytes == nil &&
				o.SinceSeconds == nil && o.SinceTime == nil && *o.Stream == v1.LogStreamAll
		}},
		{desc: "all flags", query: "follow=true&previous=1&timestamps=true&tailLines=10&limitBytes=100&sinceSeconds=60", wantCode: 200,
			check: func(o *v1.PodLogOptions) bool {
				return o.Follow && o.Previous && o.Timestamps && *o.TailLines == 10 && *o.LimitBytes == 100 && *o.SinceSeconds == 60
			}},
		{desc: "false flags", query: "follow=false&previous=0", wantCode: 200, check: func(o *v1.PodLogOptions) bool { return !o.Follow && !o.Previous }},
		{desc: "since time", query: "sinceTime=2025-01-02T03:04:05Z", wantCode: 200, check: func(o *v1.PodLogOptions) bool {
			return o.SinceTime != nil && o.SinceTime.UTC().Format("2006-01-02T15:04:05Z") == "2025-01-02T03:04:05Z"
		}},
		{desc: "legacy tail", query: "tail=5", wantCode: 200, check: func(o *v1.PodLogOptions) bool { return o.TailLines != nil && *o.TailLines == 5 }},
		{desc: "legacy tail all", query: "tail=all", wantCode: 200, check: func(o *v1.PodLogOptions) bool { return o.TailLines == nil }},
		{desc: "stdout only", query: "stream=Stdout", wantCode: 200, wantBody: "out\n"},
		{desc: "stderr only", query: "stream=Stderr", wantCode: 200, wantBody: "err\n"},
		{desc: "bad stream", query: "stream=Both", wantCode: 422},
		{desc: "stream with tail", query: "stream=Stdout&tailLines=1", wantCode: 422},
		{desc: "bad sinceTime", query: "sinceTime=yesterday", wantCode: 400},
		{desc: "both since", query: "sinceSeconds=5&sinceTime=2025-01-02T03:04:05Z", wantCode: 422},
		{desc: "zero sinceSeconds", query: "sinceSeconds=0", wantCode: 422},
		{desc: "zero limitBytes", query: "limitBytes=0", wantCode: 422},
		{desc: "bad limitBytes", query: "limitBytes=1k", wantCode: 400},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			host := &fakeHost{pods: []*v1.Pod{testPod()}, logs: "out\n", errLogs: "err\n"}
			h, err := NewAPIHandler(testAPIOptions(host))
			if err != nil {
				t.Fatal(err)
			}
			rec := serveAPI(t, h, "GET", "/containerLogs/default/web/app?"+tc.query)
			if rec.Code != tc.wantCode || (tc.wantBody != "" && rec.Body.String() != tc.wantBody) {
				t.Fatalf("%d %q; want %d %q", rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
			calls := host.recorded()
			if tc.wantCode != 200 {
				if len(calls) != 0 {
					t.Fatalf("the host was called for an invalid query: %+v", calls)
				}
				return
			}
			if len(calls) != 1 || (tc.check != nil && !tc.check(calls[0].logOpts)) {
				t.Fatalf("host calls %+v (options %+v)", calls, calls[0].logOpts)
			}
		})
	}
}

func TestAPIFilterWrapsEveryPath(t *testing.T) {
	t.Parallel()
	opts := testAPIOptions(&fakeHost{pods: []*v1.Pod{testPod()}})
	opts.Filter = func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		})
	}
	h, err := NewAPIHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/healthz", "/pods", "/metrics", "/stats/summary", "/configz", "/debug/pprof/",
		"/containerLogs/default/web/app", "/runningpods/", "/nope"} {
		if rec := serveAPI(t, h, "GET", target); rec.Code != http.StatusUnauthorized {
			t.Errorf("GET %s: %d; want the filter's 401", target, rec.Code)
		}
	}
	// A path escape is refused before the filter (see
	// TestAPIRefusesDotSegmentsBeforeTheFilter), never served.
	if rec := serveAPI(t, h, "GET", "/containerLogs/../../etc/passwd"); rec.Code != http.StatusBadRequest {
		t.Errorf("GET /containerLogs/../../etc/passwd: %d; want 400", rec.Code)
	}
}

func TestReadOnlyHandler(t *testing.T) {
	t.Parallel()
	h, err := NewReadOnlyHandler(testAPIOptions(&fakeHost{pods: []*v1.Pod{testPod()}}))
	if err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]int{
		"/healthz": 200, "/pods": 200, "/metrics": 200, "/metrics/resource": 200, "/metrics/probes": 200, "/stats/summary": 200,
		"/metrics/cadvisor": 200, "/containerLogs/default/web/app": 404, "/runningpods/": 404, "/configz": 404, "/debug/pprof/": 404,
	} {
		if rec := serveAPI(t, h, "GET", target); rec.Code != want {
			t.Errorf("GET %s: %d; want %d", target, rec.Code, want)
		}
	}
	for target, want := range map[string]int{"/exec/default/web/app?output=1": 404, "/run/default/web/app": 404, "/portForward/default/web": 404} {
		if rec := serveAPI(t, h, "POST", target); rec.Code != want {
			t.Errorf("POST %s: %d; want %d", target, rec.Code, want)
		}
	}
	if _, err := NewReadOnlyHandler(APIOptions{Health: fakeHealth{}}); err == nil {
		t.Fatal("NewReadOnlyHandler without Host succeeded")
	}
}

func TestNodeLogs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	secret := filepath.Join(dir, "secret")
	for path, content := range map[string]string{
		filepath.Join(logDir, "syslog"):        "node log\n",
		filepath.Join(logDir, "pods", "a.log"): "pod log\n",
		secret:                                 "secret\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(secret, filepath.Join(logDir, "escape.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../secret", filepath.Join(logDir, "relescape.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pods/a.log", filepath.Join(logDir, "inside.log")); err != nil {
		t.Fatal(err)
	}
	opts := testAPIOptions(&fakeHost{})
	opts.LogDir = logDir
	h, err := NewAPIHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc     string
		target   string
		wantCode int
		wantBody string
	}{
		{desc: "a file", target: "/logs/syslog", wantCode: 200, wantBody: "node log"},
		{desc: "a nested file", target: "/logs/pods/a.log", wantCode: 200, wantBody: "pod log"},
		{desc: "the listing", target: "/logs/", wantCode: 200, wantBody: "syslog"},
		{desc: "a symlink inside", target: "/logs/inside.log", wantCode: 200, wantBody: "pod log"},
		{desc: "dot-dot", target: "/logs/../secret", wantCode: 400},
		{desc: "encoded dot-dot", target: "/logs/%2e%2e/secret", wantCode: 400},
		{desc: "absolute symlink out", target: "/logs/escape.log", wantCode: 403},
		{desc: "relative symlink out", target: "/logs/relescape.log", wantCode: 403},
		{desc: "missing", target: "/logs/nope", wantCode: 404},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			rec := serveAPI(t, h, "GET", tc.target)
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantBody) || strings.Contains(rec.Body.String(), "secret\n") {
				t.Fatalf("GET %s: %d %q; want %d with %q", tc.target, rec.Code, rec.Body.String(), tc.wantCode, tc.wantBody)
			}
		})
	}
}

func TestStartAPI(t *testing.T) {
	t.Parallel()
	host := &fakeHost{pods: []*v1.Pod{testPod()}}
	opts := testAPIOptions(host)
	opts.Addr = "127.0.0.1:0"
	opts.TLSConfig = selfSignedTLS(t)
	var filtered int
	opts.Filter = func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			filtered++
			next.ServeHTTP(w, r)
		})
	}
	if _, err := StartAPI(context.Background(), APIOptions{Addr: "127.0.0.1:0", Host: host, Health: fakeHealth{}}); err == nil {
		t.Fatal("StartAPI without TLS and Filter succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := StartAPI(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + s.Addr() + "/pods")
	if err != nil {
		t.Fatal(err)
	}
	var list v1.PodList
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || resp.TLS == nil || len(list.Items) != 1 || filtered != 1 {
		t.Fatalf("GET /pods over TLS: %v, tls %v, %d pods, filtered %d", err, resp.TLS != nil, len(list.Items), filtered)
	}
	if _, err := http.Get("http://" + s.Addr() + "/pods"); err == nil {
		// Go's TLS server answers plain HTTP with a 400, never with data.
		t.Log("plain HTTP got an answer from the TLS port (expected a 400 page)")
	}
	cancel()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Get("https://" + s.Addr() + "/pods"); err == nil {
		t.Fatal("the API server still answers after ctx ended")
	}

	ro, err := StartReadOnly(context.Background(), APIOptions{Addr: "127.0.0.1:0", Host: host, Health: fakeHealth{}})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if code, body := get(t, http.DefaultClient, "http://"+ro.Addr()+"/healthz"); code != 200 || body != "ok" {
		t.Fatalf("read-only healthz: %d %q", code, body)
	}
}

// followHost writes one line, then blocks until the request ends, as a
// followed log of a quiet container does.
type followHost struct {
	*fakeHost
	ended chan struct{}
}

func (h *followHost) GetContainerLogs(ctx context.Context, _, _, _ string, opts *v1.PodLogOptions, stdout, _ io.Writer) error {
	defer close(h.ended)
	if !opts.Follow {
		return errors.New("not following")
	}
	if _, err := stdout.Write(nil); err != nil { // the kubelet's first, empty write
		return err
	}
	if _, err := io.WriteString(stdout, "first\n"); err != nil {
		return err
	}
	<-ctx.Done()
	return ctx.Err()
}

func TestContainerLogsFollowFlushes(t *testing.T) {
	t.Parallel()
	host := &followHost{fakeHost: &fakeHost{pods: []*v1.Pod{testPod()}}, ended: make(chan struct{})}
	opts := testAPIOptions(host.fakeHost)
	opts.Host = host
	h, err := NewAPIHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/containerLogs/default/web/app?follow=true", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if resp.StatusCode != 200 || err != nil || line != "first\n" {
		t.Fatalf("%d %q %v; want the first line while the log is still open", resp.StatusCode, line, err)
	}
	cancel()
	select {
	case <-host.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the log read did not end with the request")
	}
}

// TestAPIRefusesDotSegmentsBeforeTheFilter: the real filter authorizes and
// serves the cleaned path (as auth.Filter does), so dot segments must be
// refused before it, not behind it.
func TestAPIRefusesDotSegmentsBeforeTheFilter(t *testing.T) {
	t.Parallel()
	opts := testAPIOptions(&fakeHost{pods: []*v1.Pod{testPod()}, logs: "a log line\n"})
	opts.Filter = func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r2 := r.Clone(r.Context())
			r2.URL.Path = path.Clean(r.URL.Path)
			next.ServeHTTP(w, r2)
		})
	}
	h, err := NewAPIHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/stats/../healthz", "/containerLogs/default/../web/app", "/containerLogs/ns/web/..%2f..%2fetc"} {
		if rec := serveAPI(t, h, "GET", target); rec.Code != http.StatusBadRequest {
			t.Errorf("GET %s behind a path-cleaning filter: %d %q, want 400", target, rec.Code, rec.Body.String())
		}
	}
	if rec := serveAPI(t, h, "GET", "/healthz"); rec.Code != http.StatusOK {
		t.Errorf("GET /healthz: %d", rec.Code)
	}
}

// enableDebuggingHandlers, enableSystemLogHandler and enableProfilingHandler
// set false answer 405 with upstream's messages; the rest is served.
func TestDisabledDebugEndpoints(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		mod    func(*APIOptions)
		want   map[string]string // GET target -> body ("" for any 2xx)
		served []string
	}{
		{"debugging off", func(o *APIOptions) { o.DisableDebugging = true }, map[string]string{
			"/containerLogs/default/web/app": "Debug endpoints are disabled.", "/runningpods/": "Debug endpoints are disabled.",
			"/debug/pprof/": "Debug endpoints are disabled.", "/logs/": "Debug endpoints are disabled.",
		}, []string{"/configz", "/pods", "/healthz"}},
		{"logs off", func(o *APIOptions) { o.DisableSystemLogs = true }, map[string]string{"/logs/": "logs endpoint is disabled."},
			[]string{"/debug/pprof/", "/runningpods/"}},
		{"profiling off", func(o *APIOptions) { o.DisableProfiling = true }, map[string]string{"/debug/pprof/": "profiling endpoint is disabled."},
			[]string{"/runningpods/"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			opts := testAPIOptions(&fakeHost{pods: []*v1.Pod{testPod()}})
			opts.LogDir = t.TempDir()
			tc.mod(&opts)
			h, err := NewAPIHandler(opts)
			if err != nil {
				t.Fatal(err)
			}
			for target, body := range tc.want {
				rec := serveAPI(t, h, "GET", target)
				if rec.Code != http.StatusMethodNotAllowed || strings.TrimSpace(rec.Body.String()) != body {
					t.Errorf("GET %s: %d %q; want 405 %q", target, rec.Code, rec.Body.String(), body)
				}
			}
			for _, target := range tc.served {
				if rec := serveAPI(t, h, "GET", target); rec.Code != http.StatusOK {
					t.Errorf("GET %s: %d; want 200", target, rec.Code)
				}
			}
			if tc.desc == "debugging off" {
				if rec := serveAPI(t, h, "POST", "/exec/default/web/app?command=ls&output=1"); rec.Code != http.StatusMethodNotAllowed {
					t.Errorf("POST /exec: %d; want 405", rec.Code)
				}
			}
		})
	}
}

// PUT /debug/flags/v sets the verbosity through SetVerbosity with upstream's
// answers; enableDebugFlagsHandler false answers 405.
func TestDebugFlagsV(t *testing.T) {
	t.Parallel()
	var got string
	opts := testAPIOptions(&fakeHost{})
	opts.SetVerbosity = func(v string) (string, error) {
		if v == "x" {
			return "", errors.New("bad")
		}
		got = v
		return "successfully set klog.logging.verbosity to " + v, nil
	}
	h, err := NewAPIHandler(opts)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPut, "/debug/flags/v", strings.NewReader("5"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || got != "5" || strings.TrimSpace(rec.Body.String()) != "successfully set klog.logging.verbosity to 5" {
		t.Fatalf("PUT 5: %d %q (set %q)", rec.Code, rec.Body.String(), got)
	}
	for _, tc := range []struct {
		method, body string
		want         int
	}{{http.MethodPut, "x", http.StatusBadRequest}, {http.MethodGet, "", http.StatusNotAcceptable}} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, "/debug/flags/v", strings.NewReader(tc.body)))
		if rec.Code != tc.want {
			t.Errorf("%s %q: %d, want %d", tc.method, tc.body, rec.Code, tc.want)
		}
	}
	opts.DisableDebugFlags = true
	h, _ = NewAPIHandler(opts)
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPut, "/debug/flags/v", strings.NewReader("5")))
	if rec.Code != http.StatusMethodNotAllowed || strings.TrimSpace(rec.Body.String()) != "flags endpoint is disabled." {
		t.Errorf("disabled: %d %q", rec.Code, rec.Body.String())
	}
}
