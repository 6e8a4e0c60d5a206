//go:build linux

package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/streamtest"
)

// TestIntegrationKubeletAPI drives the kubelet API (HTTPS on 127.0.0.1:--port)
// through a real control plane of its own: the real kubectl's logs, exec,
// attach and port-forward (the API server reaches the kubelet at InternalIP
// 127.0.0.1 with its kubelet-client certificate), a metrics-server-shaped read
// of /stats/summary with a service account's token, and the API's refusals.
// As in TestIntegrationCluster, every subtest has a node and a namespace of its
// own.
func TestIntegrationKubeletAPI(t *testing.T) {
	runClusterCases(t, []clusterCase{
		{desc: "Logs", run: testKubectlLogs},
		{desc: "Exec", run: testKubectlExec},
		{desc: "Attach", run: testKubectlAttach},
		{desc: "Debug", run: testKubectlDebug},
		{desc: "PortForward", run: testKubectlPortForward},
		{desc: "StatsSummary", run: testStatsSummary},
		{desc: "Refusals", run: testAPIRefusals},
	})
}

// newAPINode starts a cluster node whose kubelet API accepts client
// certificates of the cluster CA (--client-ca-file; authentication and
// authorization otherwise keep their defaults: TokenReview and
// SubjectAccessReview webhooks, no anonymous access) and waits until it is
// Ready, with n.ns created.
func newAPINode(t testing.TB, c *controlplane.Cluster) *clusterNode {
	t.Helper()
	n := newClusterNode(t, c)
	n.extra = append(n.extra, "--client-ca-file="+c.CAFile)
	n.createNamespace()
	n.start()
	n.waitNodeReady(60 * time.Second)
	return n
}

// kubectlResult runs kubectl (admin) in n.ns with stdin and returns stdout,
// stderr and the exit code.
func (n *clusterNode) kubectlResult(stdin string, args ...string) (stdout, stderr string, code int) {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := n.c.KubectlCmd(ctx, append([]string{"-n", n.ns}, args...)...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr) && ctx.Err() == nil:
		code = exitErr.ExitCode()
	default:
		n.t.Fatalf("kubectl %s: %v (stderr %q)", strings.Join(args, " "), err, se.String())
	}
	return so.String(), se.String(), code
}

// bgKubectl is a kubectl process running in the background (logs -f, attach,
// port-forward). The test's cleanup kills it (by its PID, through its context).
type bgKubectl struct {
	stdout, stderr *streamtest.Buffer
	cmd            *exec.Cmd
	cancel         context.CancelFunc
	done           chan struct{}
	err            error // Wait's result, valid once done is closed
}

// startKubectl starts kubectl (admin) in n.ns with stdin (nil: none).
func (n *clusterNode) startKubectl(t *testing.T, stdin io.Reader, args ...string) *bgKubectl {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	k := &bgKubectl{stdout: streamtest.NewBuffer(), stderr: streamtest.NewBuffer(), cancel: cancel, done: make(chan struct{})}
	k.cmd = n.c.KubectlCmd(ctx, append([]string{"-n", n.ns}, args...)...)
	k.cmd.Stdin, k.cmd.Stdout, k.cmd.Stderr = stdin, k.stdout, k.stderr
	if err := k.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start kubectl %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		k.err = k.cmd.Wait()
		close(k.done)
	}()
	t.Cleanup(k.stop)
	return k
}

// stop kills the process (if still running) and reaps it. A pipe as stdin is
// closed once the process is gone: Wait waits for the copy from it.
func (k *bgKubectl) stop() {
	k.cancel()
	if pr, ok := k.cmd.Stdin.(*io.PipeReader); ok {
		_ = pr.Close()
	}
	<-k.done
}

// wait waits up to timeout for the process to exit and returns its exit code.
func (k *bgKubectl) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-k.done:
	case <-time.After(timeout):
		t.Fatalf("kubectl %s still running after %s; stdout %q stderr %q", strings.Join(k.cmd.Args[1:], " "), timeout, k.stdout, k.stderr)
	}
	return k.cmd.ProcessState.ExitCode()
}

const logsYAML = `apiVersion: v1
kind: Pod
metadata: {name: talker, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "echo first; echo second; sleep 1; echo third >&2; i=0; while [ ! -e /tmp/go ] && [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done; echo late; sleep 1"]
---
apiVersion: v1
kind: Pod
metadata: {name: crasher, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "n=$(cat /d/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /d/n; echo generation-$n; [ $n -gt 1 ] || exit 1; exec sleep 3600"]
    volumeMounts: [{name: d, mountPath: /d}]
  volumes: [{name: d, emptyDir: {}}]
`

// testKubectlLogs: kubectl logs of a pod's container (stdout and stderr), with
// --tail, --limit-bytes, --timestamps and --since; -f follows new lines and ends
// when the container exits; --previous reads the instance before a restart and
// is refused for a container that never restarted.
func testKubectlLogs(t *testing.T, c *controlplane.Cluster) {
	n := newAPINode(t, c)
	n.applyYAML(logsYAML)
	n.waitAPIPod("talker", podStartTimeout, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	var out string
	n.poll(30*time.Second, "kubectl logs talker shows its first lines", func() (bool, string) {
		var stderr string
		out, stderr, _ = n.kubectlResult("", "logs", "talker")
		return strings.Contains(out, "third\n"), out + stderr
	})
	for _, tc := range []struct {
		desc string
		args []string
		want string
	}{
		{desc: "plain", want: "first\nsecond\nthird\n"},
		{desc: "container named", args: []string{"-c", "main"}, want: "first\nsecond\nthird\n"},
		{desc: "tail 1", args: []string{"--tail=1"}, want: "third\n"},
		{desc: "tail 2", args: []string{"--tail=2"}, want: "second\nthird\n"},
		{desc: "limit bytes", args: []string{"--limit-bytes=3"}, want: "fir"},
		{desc: "since 1h", args: []string{"--since=1h"}, want: "first\nsecond\nthird\n"},
	} {
		if got := n.kubectl("", append([]string{"-n", n.ns, "logs", "talker"}, tc.args...)...); got != tc.want {
			t.Errorf("%s: kubectl logs %v = %q, want %q", tc.desc, tc.args, got, tc.want)
		}
	}
	third := checkTimestamps(t, n.kubectl("", "-n", n.ns, "logs", "talker", "--timestamps"))

	follow := n.startKubectl(t, nil, "logs", "-f", "talker")
	follow.stdout.WaitFor(t, "third\n", 20*time.Second)
	if strings.Contains(follow.stdout.String(), "late") {
		t.Fatalf("the test was too slow: the line after the pause was logged before kubectl logs -f started")
	}
	// No line in the last 2 s: --since=2s answers nothing.
	time.Sleep(time.Until(third.Add(2500 * time.Millisecond)))
	if got := n.kubectl("", "-n", n.ns, "logs", "talker", "--since=2s"); strings.Contains(got, "first") || strings.Contains(got, "third") {
		t.Errorf("kubectl logs --since=2s (third line at %s, now %s) = %q, want no older line", third.Format(time.RFC3339Nano), time.Now().Format(time.RFC3339Nano), got)
	}
	// The container logs its last line when told (a fixed pause was too
	// short for the commands above on a loaded machine).
	n.kubectl("", "-n", n.ns, "exec", "talker", "--", "touch", "/tmp/go")
	follow.stdout.WaitFor(t, "late\n", 30*time.Second)
	start := time.Now()
	if code := follow.wait(t, 30*time.Second); code != 0 {
		t.Errorf("kubectl logs -f exited with %d after the container exited: %s", code, follow.stderr)
	}
	t.Logf("kubectl logs -f ended %s after the last line", time.Since(start).Round(time.Millisecond))
	if got := follow.stdout.String(); got != "first\nsecond\nthird\nlate\n" {
		t.Errorf("kubectl logs -f printed %q", got)
	}
	if _, stderr, code := n.kubectlResult("", "logs", "talker", "--previous"); code == 0 || !strings.Contains(stderr, "previous terminated container") {
		t.Errorf("kubectl logs --previous of a container that never restarted: exit %d, stderr %q; want a refusal", code, stderr)
	}

	n.waitAPIPod("crasher", 60*time.Second, "restarted once and running", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.RestartCount >= 1 && cs.State.Running != nil
	})
	n.poll(20*time.Second, "kubectl logs crasher shows the second instance", func() (bool, string) {
		out, stderr, _ := n.kubectlResult("", "logs", "crasher")
		return out == "generation-2\n", out + stderr
	})
	if got := n.kubectl("", "-n", n.ns, "logs", "crasher", "--previous"); got != "generation-1\n" {
		t.Errorf("kubectl logs --previous = %q, want the first instance's %q", got, "generation-1\n")
	}
}

// checkTimestamps checks kubectl logs --timestamps of talker: three lines, each
// prefixed by an RFC 3339 timestamp of the last minute, in order. It returns
// the last line's timestamp.
func checkTimestamps(t *testing.T, out string) time.Time {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{"first", "second", "third"}
	if len(lines) != len(want) {
		t.Fatalf("kubectl logs --timestamps = %q, want 3 lines", out)
	}
	var last time.Time
	for i, line := range lines {
		ts, text, _ := strings.Cut(line, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil || text != want[i] || at.Before(last) || time.Since(at) > time.Minute || time.Until(at) > time.Second {
			t.Fatalf("kubectl logs --timestamps line %q (err %v), want <RFC 3339 time of the last minute> %s", line, err, want[i])
		}
		last = at
	}
	return last
}

// shellYAML is a pod that logs a marker line and sleeps (for exec and logs).
func shellYAML() string {
	return podYAML("shell", 1, `["sh", "-c", "echo kubelet-api-log-marker; exec sleep 3600"]`)
}

// testKubectlExec: kubectl exec with stdout and stderr apart, exit codes, stdin
// (-i) and a large output, in the pod's container.
func testKubectlExec(t *testing.T, c *controlplane.Cluster) {
	n := newAPINode(t, c)
	n.applyYAML(shellYAML())
	n.waitAPIPod("shell", podStartTimeout, "running", runningAndReady)
	for _, tc := range []struct {
		desc       string
		stdin      string
		args       []string
		wantOut    string
		wantErr    string // a substring of stderr
		wantCode   int
		checkOut   func(string) bool // instead of wantOut
		outComment string
	}{
		{desc: "stdout and stderr", args: []string{"--", "sh", "-c", "echo out; echo err >&2"}, wantOut: "out\n", wantErr: "err\n"},
		{desc: "in the pod's container", args: []string{"-c", "main", "--", "sh", "-c", "echo $HOSTNAME; cat /proc/1/cmdline | tr '\\0' ' '"},
			wantOut: "shell\nsleep 3600 "},
		{desc: "exit code", args: []string{"--", "sh", "-c", "echo before; exit 3"}, wantOut: "before\n", wantErr: "exit code 3", wantCode: 3},
		{desc: "interactive stdin", stdin: "hello\nworld\n", args: []string{"-i", "--", "tr", "a-z", "A-Z"}, wantOut: "HELLO\nWORLD\n"},
		{desc: "interactive read and exit code", stdin: "7\n", args: []string{"-i", "--", "sh", "-c", "read x; echo got-$x; exit $x"},
			wantOut: "got-7\n", wantCode: 7},
		{desc: "1 MiB of output", args: []string{"--", "sh", "-c", "head -c 1048576 /dev/zero | tr '\\0' x"},
			checkOut: func(s string) bool { return len(s) == 1<<20 && strings.Trim(s, "x") == "" }, outComment: "1048576 x"},
		{desc: "unknown container", args: []string{"-c", "nope", "--", "true"}, wantErr: "nope", wantCode: 1},
	} {
		start := time.Now()
		out, stderr, code := n.kubectlResult(tc.stdin, append([]string{"exec", "shell"}, tc.args...)...)
		took := time.Since(start).Round(time.Millisecond)
		okOut := out == tc.wantOut
		if tc.checkOut != nil {
			okOut = tc.checkOut(out)
		} else {
			tc.outComment = strings.ReplaceAll(tc.wantOut, "\n", `\n`)
		}
		if !okOut || code != tc.wantCode || !strings.Contains(stderr, tc.wantErr) {
			if len(out) > 200 {
				out = out[:200] + "..."
			}
			t.Errorf("%s: kubectl exec %v: exit %d, stdout %q, stderr %q; want exit %d, stdout %s, stderr holding %q",
				tc.desc, tc.args, code, out, stderr, tc.wantCode, tc.outComment, tc.wantErr)
			continue
		}
		t.Logf("%s: kubectl exec took %s", tc.desc, took)
	}
}

// attachYAML is a pod echoing the lines of its stdin to stdout and stderr.
func attachYAML() string {
	return podYAML("reader", 1, `["sh", "-c", "echo ready; while read line; do echo got-$line; echo err-$line >&2; done; echo stdin-closed"]`, "stdin: true")
}

// testKubectlAttach: kubectl attach -i to a container reading stdin: lines
// written to kubectl reach the container and its answers (stdout and stderr)
// come back; after kubectl is gone the container still runs and a second
// attach works.
func testKubectlAttach(t *testing.T, c *controlplane.Cluster) {
	n := newAPINode(t, c)
	n.applyYAML(attachYAML())
	n.waitAPIPod("reader", podStartTimeout, "running", runningAndReady)
	for i, word := range []string{"one", "two"} {
		stdinR, stdinW := io.Pipe()
		a := n.startKubectl(t, stdinR, "attach", "-i", "reader", "-c", "main")
		// kubectl writes stdin only once the stream is up; until then the pipe blocks.
		go func() { _, _ = io.WriteString(stdinW, word+"\n") }()
		a.stdout.WaitFor(t, "got-"+word+"\n", 20*time.Second)
		a.stderr.WaitFor(t, "err-"+word+"\n", 10*time.Second)
		if i == 0 {
			go func() { _, _ = io.WriteString(stdinW, "again\n") }()
			a.stdout.WaitFor(t, "got-again\n", 10*time.Second)
		}
		a.stop()
		_ = stdinW.Close()
		if strings.Contains(a.stdout.String(), "ready") {
			t.Errorf("attach %d printed output from before it attached: %q", i+1, a.stdout.String())
		}
	}
	p := n.waitAPIPod("reader", 5*time.Second, "running", runningAndReady)
	if restarts := restartCounts(p)["main"]; restarts != 0 {
		t.Errorf("the attached container restarted %d times", restarts)
	}
	n.poll(10*time.Second, "the container's log holds what both attaches wrote", func() (bool, string) {
		out, stderr, _ := n.kubectlResult("", "logs", "reader")
		for _, line := range []string{"ready", "got-one", "err-one", "got-again", "got-two", "err-two"} {
			if !strings.Contains(out, line+"\n") {
				return false, out + stderr
			}
		}
		return !strings.Contains(out, "stdin-closed"), out + stderr
	})
}

const portForwardYAML = `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "mkdir -p /www && echo hello-through-port-forward > /www/index.html && exec httpd -f -p 8080 -h /www"]
    ports: [{containerPort: 8080}]
    readinessProbe:
      exec: {command: ["wget", "-q", "-O", "/dev/null", "http://127.0.0.1:8080/index.html"]}
      periodSeconds: 1
`

var forwardingRE = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 8080`)

// testKubectlPortForward: kubectl port-forward to a pod running busybox httpd
// on 8080; HTTP requests to the forwarded 127.0.0.1 port (several connections)
// get httpd's answers.
func testKubectlPortForward(t *testing.T, c *controlplane.Cluster) {
	n := newAPINode(t, c)
	n.applyYAML(portForwardYAML)
	n.waitAPIPod("web", podStartTimeout, "running and ready (httpd answers)", runningAndReady)
	pf := n.startKubectl(t, nil, "port-forward", "pod/web", ":8080", "--address=127.0.0.1")
	var local string
	deadline := time.Now().Add(20 * time.Second)
	for local == "" {
		if m := forwardingRE.FindStringSubmatch(pf.stdout.String()); m != nil {
			local = m[1]
			break
		}
		select {
		case <-pf.done:
			t.Fatalf("kubectl port-forward exited: %v; stdout %q stderr %q", pf.err, pf.stdout, pf.stderr)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl port-forward not forwarding after 20s: stdout %q stderr %q", pf.stdout, pf.stderr)
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for _, tc := range []struct {
		desc, path string
		wantCode   int
		wantBody   string
	}{
		{desc: "the file", path: "/index.html", wantCode: http.StatusOK, wantBody: "hello-through-port-forward\n"},
		{desc: "again, new connection", path: "/index.html", wantCode: http.StatusOK, wantBody: "hello-through-port-forward\n"},
		{desc: "a missing file", path: "/missing", wantCode: http.StatusNotFound},
	} {
		start := time.Now()
		resp, err := hc.Get("http://127.0.0.1:" + local + tc.path)
		if err != nil {
			t.Fatalf("%s: GET %s through port-forward: %v; kubectl stderr %q", tc.desc, tc.path, err, pf.stderr)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tc.wantCode || (tc.wantBody != "" && string(body) != tc.wantBody) {
			t.Errorf("%s: GET %s: %d %q (err %v), want %d %q", tc.desc, tc.path, resp.StatusCode, body, err, tc.wantCode, tc.wantBody)
		}
		t.Logf("%s: GET %s through port-forward took %s", tc.desc, tc.path, time.Since(start).Round(time.Millisecond))
	}
	select {
	case <-pf.done:
		t.Errorf("kubectl port-forward ended early: %v; stderr %q", pf.err, pf.stderr)
	default:
	}
}
