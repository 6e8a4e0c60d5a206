//go:build linux

package kubeletserver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	clientpf "k8s.io/client-go/tools/portforward"
	clientrc "k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/flowcontrol"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/shim"
)

const integrationImage = "kubelet-dockershim/busybox:latest"

// TestIntegrationAPIWithRuntime serves the kubelet API (TLS, identity filter)
// in front of a real runtime manager on a shim-only instance of the binary and
// dockerd: a pod runs httpd and cat, and the test drives exec, attach and
// port-forward (SPDY and WebSocket), logs with their options, /run,
// /runningpods/, /checkpoint (501 from the shim) and the path refusals.
func TestIntegrationAPIWithRuntime(t *testing.T) {
	env := startRuntimeEnv(t)
	cfg, base := env.startAPI(t)
	a := &apiClient{cfg: cfg, base: base, pod: env.pod,
		client: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	for _, tc := range []struct {
		desc string
		test func(t *testing.T, a *apiClient)
	}{
		{"exec", testExec},
		{"exec latency", testExecLatency},
		{"attach", testAttach},
		{"port-forward", testPortForward},
		{"logs", testLogs},
		{"logs previous", testLogsPrevious},
		{"logs follow", testLogsFollow},
		{"run and running pods", testRunAndRunningPods},
		{"refusals", testRefusals},
	} {
		t.Run(tc.desc, func(t *testing.T) { tc.test(t, a) })
	}
}

// apiClient reaches the API server under test.
type apiClient struct {
	cfg    *rest.Config
	base   string
	client *http.Client
	pod    *v1.Pod
}

func testExec(t *testing.T, a *apiClient) {
	for proto, exec := range executors(t, a.cfg, a.base+execPath(a.pod, "web", true, "sh", "-c", "read x; echo got-$x; echo err >&2; exit 3")) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		var stdout, stderr bytes.Buffer
		err := exec.StreamWithContext(ctx, clientrc.StreamOptions{Stdin: strings.NewReader("hello\n"), Stdout: &stdout, Stderr: &stderr})
		cancel()
		if got := exitCode(err); got != 3 || stdout.String() != "got-hello\n" || stderr.String() != "err\n" {
			t.Errorf("exec over %s: exit %d (%v), stdout %q, stderr %q; want 3, %q, %q", proto, got, err, stdout.String(), stderr.String(), "got-hello\n", "err\n")
		}
	}
}

func testExecLatency(t *testing.T, a *apiClient) {
	for proto, exec := range executors(t, a.cfg, a.base+execPath(a.pod, "web", false, "true")) {
		var took []time.Duration
		for range 7 {
			start := time.Now()
			if err := exec.StreamWithContext(t.Context(), clientrc.StreamOptions{Stdout: io.Discard, Stderr: io.Discard}); err != nil {
				t.Fatalf("exec true over %s: %v", proto, err)
			}
			took = append(took, time.Since(start))
		}
		slices.Sort(took)
		t.Logf("exec round trip through the kubelet API over %s: median %s, min %s, max %s", proto, took[len(took)/2], took[0], took[len(took)-1])
	}
}

func testAttach(t *testing.T, a *apiClient) {
	for proto, exec := range executors(t, a.cfg, a.base+fmt.Sprintf("/attach/%s/%s/web?input=1&output=1&error=1", a.pod.Namespace, a.pod.Name)) {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		stdinR, stdinW := io.Pipe()
		stdout := &lineWaiter{lines: make(chan string, 16)}
		done := make(chan error, 1)
		go func() {
			done <- exec.StreamWithContext(ctx, clientrc.StreamOptions{Stdin: stdinR, Stdout: stdout, Stderr: io.Discard})
		}()
		want := "typed-over-" + proto
		if _, err := io.WriteString(stdinW, want+"\n"); err != nil {
			t.Fatalf("write to attach stdin over %s: %v", proto, err)
		}
		if err := stdout.waitFor(want, 15*time.Second); err != nil {
			t.Errorf("attach over %s: %v", proto, err)
		}
		cancel()
		_ = stdinW.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("attach over %s did not end after cancel", proto)
		}
	}
}

func testPortForward(t *testing.T, a *apiClient) {
	u, err := url.Parse(a.base + fmt.Sprintf("/portForward/%s/%s", a.pod.Namespace, a.pod.Name))
	if err != nil {
		t.Fatal(err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(a.cfg)
	if err != nil {
		t.Fatal(err)
	}
	wsDialer, err := clientpf.NewSPDYOverWebsocketDialer(u, a.cfg)
	if err != nil {
		t.Fatal(err)
	}
	for proto, dialer := range map[string]httpstream.Dialer{"spdy": spdy.NewDialer(upgrader, &http.Client{Transport: transport}, "POST", u), "websocket tunnel": wsDialer} {
		local := forward(t, dialer, 8080)
		for i := range 2 {
			if reply := httpGet(t, fmt.Sprintf("127.0.0.1:%d", local)); !strings.Contains(reply, "hello-pf") {
				t.Fatalf("request %d through port-forward over %s: %q; want the pod's page", i, proto, reply)
			}
		}
	}
}

func testLogs(t *testing.T, a *apiClient) {
	logs := func(query string) (int, string) {
		resp, err := a.client.Get(a.base + fmt.Sprintf("/containerLogs/%s/%s/web?%s", a.pod.Namespace, a.pod.Name, query))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		desc     string
		query    string
		wantCode int
		check    func(body string) bool
	}{
		{desc: "all", check: func(b string) bool {
			return strings.Contains(b, "web-started\n") && strings.Contains(b, "web-to-stderr\n")
		}},
		{desc: "stdout only", query: "stream=Stdout", check: func(b string) bool {
			return strings.Contains(b, "web-started\n") && !strings.Contains(b, "web-to-stderr")
		}},
		{desc: "stderr only", query: "stream=Stderr", check: func(b string) bool { return b == "web-to-stderr\n" }},
		{desc: "tail", query: "tailLines=1", check: func(b string) bool { return strings.Count(b, "\n") == 1 }},
		{desc: "limit bytes", query: "limitBytes=4", check: func(b string) bool { return b == "web-" }},
		{desc: "timestamps", query: "timestamps=true&tailLines=1", check: func(b string) bool {
			ts, _, ok := strings.Cut(b, " ")
			_, err := time.Parse(time.RFC3339Nano, ts)
			return ok && err == nil
		}},
		{desc: "since in the future", query: "sinceTime=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), check: func(b string) bool { return b == "" }},
		{desc: "since seconds", query: "sinceSeconds=3600", check: func(b string) bool { return strings.Contains(b, "web-started") }},
		{desc: "invalid", query: "tailLines=-3", wantCode: 422},
	}
	for _, tc := range tests {
		code, body := logs(tc.query)
		want := tc.wantCode
		if want == 0 {
			want = 200
		}
		if code != want || (tc.check != nil && !tc.check(body)) {
			t.Errorf("logs %s (?%s): %d %q", tc.desc, tc.query, code, body)
		}
	}
}

func testLogsPrevious(t *testing.T, a *apiClient) {
	resp, err := a.client.Get(a.base + fmt.Sprintf("/containerLogs/%s/%s/crash?previous=true", a.pod.Namespace, a.pod.Name))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "crash-run") {
		t.Fatalf("previous logs: %d %q", resp.StatusCode, b)
	}
}

func testLogsFollow(t *testing.T, a *apiClient) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", a.base+fmt.Sprintf("/containerLogs/%s/%s/web?follow=true&tailLines=0", a.pod.Namespace, a.pod.Name), nil)
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	// The container's cat echoes its stdin: attach and type a line, again
	// every 200ms until it is read (the follower may still be finding the
	// log's end when the first one is written).
	exec := executors(t, a.cfg, a.base+fmt.Sprintf("/attach/%s/%s/web?input=1&output=1", a.pod.Namespace, a.pod.Name))["spdy"]
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() {
		for {
			if _, err := io.WriteString(pw, "followed-line\n"); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	go func() {
		_ = exec.StreamWithContext(ctx, clientrc.StreamOptions{Stdin: pr, Stdout: io.Discard})
		_ = pr.Close()
	}()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "followed-line\n" {
		t.Fatalf("followed log line %q, %v", line, err)
	}
}

func testRunAndRunningPods(t *testing.T, a *apiClient) {
	resp, err := a.client.Post(a.base+fmt.Sprintf("/run/%s/%s/web?cmd=echo+ran-here", a.pod.Namespace, a.pod.Name), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ran-here\n" {
		t.Fatalf("/run: %d %q", resp.StatusCode, b)
	}
	resp, err = a.client.Get(a.base + "/runningpods/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), string(a.pod.UID)) {
		t.Fatalf("/runningpods/: %d %q", resp.StatusCode, b)
	}
}

func testRefusals(t *testing.T, a *apiClient) {
	for target, want := range map[string]int{
		fmt.Sprintf("/containerLogs/%s/%s/..%%2F..%%2Fetc", a.pod.Namespace, a.pod.Name):      400,
		fmt.Sprintf("/containerLogs/%s/..%%2F..%%2F..%%2Fetc%%2Fpasswd/web", a.pod.Namespace): 400,
		"/containerLogs/" + a.pod.Namespace + "/../../../etc/passwd":                          400,
		fmt.Sprintf("/containerLogs/%s/%s/nope", a.pod.Namespace, a.pod.Name):                 404,
		"/logs/../../etc/passwd":     400,
		"/logs/%2e%2e/etc/passwd":    400,
		"/logs/escape/passwd":        403,
		"/logs/node.log":             200,
		"/containerLogs/x/y/z":       404,
		"/debug/pprof/goroutine":     200,
		"/exec/default/x/y?output=1": 404,
	} {
		resp, err := a.client.Get(a.base + target) // sent as written: Go's client neither cleans nor re-escapes

		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || strings.Contains(string(b), "root:") {
			t.Errorf("GET %s: %d %q; want %d", target, resp.StatusCode, b, want)
		}
	}
	resp, err := a.client.Post(a.base+fmt.Sprintf("/checkpoint/%s/%s/web", a.pod.Namespace, a.pod.Name), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotImplemented {
		t.Errorf("checkpoint on the shim: %d %q; want 501", resp.StatusCode, b)
	}
}

// execPath builds an exec URL path with the command as repeated parameters.
func execPath(pod *v1.Pod, container string, stdin bool, cmd ...string) string {
	q := url.Values{"output": {"1"}, "error": {"1"}, "command": cmd}
	if stdin {
		q.Set("input", "1")
	}
	return fmt.Sprintf("/exec/%s/%s/%s?%s", pod.Namespace, pod.Name, container, q.Encode())
}

// lineWaiter collects written lines for waitFor.
type lineWaiter struct {
	buf   bytes.Buffer
	lines chan string
}

func (l *lineWaiter) Write(p []byte) (int, error) {
	l.buf.Write(p)
	for {
		line, err := l.buf.ReadString('\n')
		if err != nil {
			l.buf.WriteString(line) // keep the partial line
			break
		}
		select {
		case l.lines <- strings.TrimSuffix(line, "\n"):
		default:
		}
	}
	return len(p), nil
}

func (l *lineWaiter) waitFor(want string, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		select {
		case line := <-l.lines:
			if line == want {
				return nil
			}
		case <-deadline:
			return fmt.Errorf("no line %q within %s", want, timeout)
		}
	}
}

// blockUntil is a reader that blocks until ctx ends, then reports EOF.
func blockUntil(ctx context.Context) io.Reader {
	r, w := io.Pipe()
	go func() {
		<-ctx.Done()
		_ = w.Close()
	}()
	return r
}

// runtimeEnv is a runtime manager over a shim-only instance of the binary.
type runtimeEnv struct {
	dir string
	m   *kuberuntime.Manager
	pod *v1.Pod
}

func startRuntimeEnv(t *testing.T) *runtimeEnv {
	t.Helper()
	s := kubelet.Start(t, shim.Options{})
	rt, images := s.Dial(t, 30*time.Second)
	m, err := kuberuntime.New(kuberuntime.Options{Runtime: rt, Images: images, Helper: &podsHelper{dir: filepath.Join(s.Dir, "pods")},
		Logger: zaptest.NewLogger(t), PodLogsDir: filepath.Join(s.Dir, "podlogs"), RuntimeName: "docker", SerializeImagePulls: true, MachineMemoryBytes: 8 << 30})
	if err != nil {
		t.Fatal(err)
	}
	env := &runtimeEnv{dir: s.Dir, m: m, pod: streamingPod()}
	t.Cleanup(func() { shim.RemovePodSandboxes(t, rt, string(env.pod.UID)) })
	ctx, cancel := context.WithTimeout(s.Context(), 2*time.Minute)
	defer cancel()
	env.runPod(ctx, t)
	return env
}

// startAPI serves the API in front of the manager with the node logs in
// dir/varlog (with a symlink escaping it) and returns a client config.
func (e *runtimeEnv) startAPI(t *testing.T) (*rest.Config, string) {
	t.Helper()
	logDir := filepath.Join(e.dir, "varlog")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(logDir, "node.log"), []byte("node\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(logDir, "escape")); err != nil {
		t.Fatal(err)
	}
	return serveTestAPI(t, APIOptions{Host: &runtimeHost{m: e.m, pod: e.pod}, Health: fakeHealth{}, LogDir: logDir})
}

// streamingPod: web prints to both streams, serves /tmp/www on :8080 with
// busybox httpd and echoes its stdin (cat); crash prints and exits 3, so it
// restarts and has a previous instance.
func streamingPod() *v1.Pod {
	c := func(name, script string) v1.Container {
		return v1.Container{Name: name, Image: integrationImage, ImagePullPolicy: v1.PullIfNotPresent,
			Command: []string{"sh", "-c", script}, TerminationMessagePolicy: v1.TerminationMessageReadFile}
	}
	web := c("web", "echo web-started; echo web-to-stderr >&2; mkdir -p /tmp/www && echo hello-pf > /tmp/www/index.html && httpd -p 8080 -h /tmp/www && exec cat")
	web.Stdin = true
	crash := c("crash", "echo crash-run-$(date +%s%N); exit 3")
	grace := int64(2)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("kls-%d", os.Getpid()), Namespace: "default",
			UID: k8stypes.UID(fmt.Sprintf("kls-uid-%d-%d", os.Getpid(), time.Now().UnixNano()))},
		Spec: v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{web, crash}},
	}
}

// runPod syncs the pod until web runs with httpd answering and crash has
// restarted once.
func (e *runtimeEnv) runPod(ctx context.Context, t *testing.T) {
	t.Helper()
	backOff := flowcontrol.NewBackOff(200*time.Millisecond, time.Second)
	deadline := time.Now().Add(90 * time.Second)
	for {
		st, err := e.m.GetPodStatus(ctx, e.pod.UID, e.pod.Name, e.pod.Namespace)
		if err != nil {
			t.Fatalf("GetPodStatus: %v", err)
		}
		web, crash := st.FindContainerStatusByName("web"), st.FindContainerStatusByName("crash")
		if web != nil && web.State == kubecontainer.StateRunning && crash != nil && crash.RestartCount >= 1 && crash.State == kubecontainer.StateExited {
			if out, err := e.m.RunInContainer(ctx, web.ID, []string{"wget", "-q", "-O", "-", "http://127.0.0.1:8080/index.html"}, 5*time.Second); err == nil && strings.Contains(string(out), "hello-pf") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod did not start: web %+v crash %+v", web, crash)
		}
		for _, r := range e.m.SyncPod(ctx, e.pod, st, nil, backOff, false).SyncResults {
			if r.Error != nil && r.Error != kubecontainer.ErrCrashLoopBackOff {
				t.Fatalf("SyncPod: %s %s: %v: %s", r.Action, r.Target, r.Error, r.Message)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// httpGet sends a raw HTTP/1.0 GET for /index.html and returns the reply.
func httpGet(t *testing.T, addr string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(conn, "GET /index.html HTTP/1.0\r\nHost: pod\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(conn)
	return string(b)
}
