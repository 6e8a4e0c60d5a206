package kuberuntime

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func TestRunLifecycleHandlerExec(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		execErr error
		wantMsg string
	}{
		{desc: "success"},
		{desc: "non-zero exit", execErr: errors.New("command terminated with exit code 2"),
			wantMsg: `Exec lifecycle hook ([/bin/hook arg]) for Container "a" in Pod "web_default(uid-1)" failed - error:`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			pod := testPod("a")
			if tc.execErr != nil {
				e.runtime.InjectError("ExecSync", tc.execErr)
			}
			h := &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/hook", "arg"}}}
			msg, err := e.m.runLifecycleHandler(context.Background(), pod, &pod.Spec.Containers[0], kubecontainer.ContainerID{Type: "fake", ID: "cid"}, h, "")
			if (err != nil) != (tc.execErr != nil) || (tc.execErr != nil && !errors.Is(err, tc.execErr)) {
				t.Fatalf("error = %v, want %v", err, tc.execErr)
			}
			if !strings.HasPrefix(msg, tc.wantMsg) || (tc.wantMsg == "" && msg != "") {
				t.Errorf("message = %q, want prefix %q", msg, tc.wantMsg)
			}
			if len(e.runtime.execs) != 1 || strings.Join(e.runtime.execs[0], " ") != "/bin/hook arg" {
				t.Errorf("execs = %v", e.runtime.execs)
			}
		})
	}
}

// hookServer answers on 127.0.0.1 and records the requests it gets.
type hookServer struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
}

func newHookServer(t *testing.T) *hookServer {
	t.Helper()
	hs := &hookServer{}
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://other.invalid/", http.StatusFound)
	})
	mux.HandleFunc("/local", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/fail", http.StatusFound) })
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hs.mu.Lock()
		hs.requests = append(hs.requests, r.Clone(context.Background()))
		hs.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

func (hs *hookServer) port(t *testing.T) int {
	t.Helper()
	_, p, err := net.SplitHostPort(hs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func TestHTTPHook(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc      string
		action    func(port int) *v1.HTTPGetAction
		podIP     string
		wantErr   string
		wantPath  string
		wantHost  string
		wantQuery string
	}{
		{
			desc: "2xx succeeds",
			action: func(p int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(p)), Path: "/ok"}
			},
			wantPath: "/ok",
		},
		{
			desc: "5xx fails",
			action: func(p int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(p)), Path: "/fail"}
			},
			wantErr: "HTTP status 500", wantPath: "/fail",
		},
		{
			desc: "redirect to another host is not followed, 3xx succeeds",
			action: func(p int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(p)), Path: "/away"}
			},
			wantPath: "/away",
		},
		{
			desc: "redirect on the same host is followed",
			action: func(p int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt32(int32(p)), Path: "/local"}
			},
			wantErr: "HTTP status 500", wantPath: "/fail",
		},
		{
			desc:  "no host: the pod IP; named port; path without slash; query; Host header",
			podIP: "127.0.0.1",
			action: func(p int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Port: intstr.FromString("web"), Path: "ok?drain=1",
					HTTPHeaders: []v1.HTTPHeader{{Name: "Host", Value: "svc.example"}, {Name: "X-Token", Value: "t"}}}
			},
			wantPath: "/ok", wantHost: "svc.example", wantQuery: "drain=1",
		},
		{
			desc:    "no host and no pod IP",
			action:  func(p int) *v1.HTTPGetAction { return &v1.HTTPGetAction{Port: intstr.FromInt32(int32(p)), Path: "/ok"} },
			wantErr: "the pod has no IP",
		},
		{
			desc: "unknown named port",
			action: func(p int) *v1.HTTPGetAction {
				return &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromString("nope"), Path: "/ok"}
			},
			wantErr: `no port named "nope"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			hs := newHookServer(t)
			pod := testPod("a")
			c := &pod.Spec.Containers[0]
			c.Ports = []v1.ContainerPort{{Name: "web", ContainerPort: int32(hs.port(t))}}
			h := &v1.LifecycleHandler{HTTPGet: tc.action(hs.port(t))}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			msg, err := e.m.runLifecycleHandler(ctx, pod, c, kubecontainer.ContainerID{Type: "fake", ID: "cid"}, h, tc.podIP)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.HasPrefix(msg, "HTTP lifecycle hook") {
					t.Fatalf("error = %v (message %q), want %q", err, msg, tc.wantErr)
				}
			} else if err != nil {
				t.Fatalf("hook: %v", err)
			}
			if tc.wantPath == "" {
				return
			}
			hs.mu.Lock()
			defer hs.mu.Unlock()
			last := hs.requests[len(hs.requests)-1]
			if last.URL.Path != tc.wantPath || last.URL.RawQuery != tc.wantQuery {
				t.Errorf("request %s?%s, want %s?%s", last.URL.Path, last.URL.RawQuery, tc.wantPath, tc.wantQuery)
			}
			if tc.wantHost != "" && (last.Host != tc.wantHost || last.Header.Get("X-Token") != "t") {
				t.Errorf("Host %q, headers %v", last.Host, last.Header)
			}
			if !strings.HasPrefix(last.UserAgent(), "kube-lifecycle/") {
				t.Errorf("User-Agent = %q", last.UserAgent())
			}
		})
	}
}

func TestSleepAndOtherHooks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc    string
		handler *v1.LifecycleHandler
		timeout time.Duration
		wantErr string
		maxTook time.Duration
	}{
		{desc: "sleep 0", handler: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 0}}, timeout: time.Second, maxTook: 2 * time.Second},
		{desc: "sleep cut by the context", handler: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 60}}, timeout: 100 * time.Millisecond,
			wantErr: "sleep interrupted", maxTook: 2 * time.Second},
		{desc: "tcpSocket is not supported", handler: &v1.LifecycleHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}},
			timeout: time.Second, wantErr: "not supported", maxTook: time.Second},
		{desc: "empty handler", handler: &v1.LifecycleHandler{}, timeout: time.Second, wantErr: "no action", maxTook: time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			pod := testPod("a")
			ctx, cancel := context.WithTimeout(context.Background(), tc.timeout)
			defer cancel()
			start := time.Now()
			_, err := e.m.runLifecycleHandler(ctx, pod, &pod.Spec.Containers[0], kubecontainer.ContainerID{}, tc.handler, "")
			if took := time.Since(start); took > tc.maxTook {
				t.Errorf("took %v, want at most %v", took, tc.maxTook)
			}
			if tc.wantErr == "" && err != nil {
				t.Fatalf("hook: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestRunInContainer(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	id := kubecontainer.ContainerID{Type: "fake", ID: "cid"}
	if _, err := e.m.RunInContainer(context.Background(), id, []string{"ls"}, time.Second); err != nil {
		t.Fatalf("RunInContainer: %v", err)
	}
	cause := errors.New("exit code 1")
	e.runtime.InjectError("ExecSync", cause)
	_, err := e.m.RunInContainer(context.Background(), id, []string{"false"}, time.Second)
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "fake://cid") {
		t.Errorf("RunInContainer error = %v, want it to wrap %v and name the container", err, cause)
	}
}
