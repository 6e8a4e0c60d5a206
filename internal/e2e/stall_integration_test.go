//go:build linux

package e2e

import (
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// stallProxy is an HTTP proxy on a unix socket in front of a dockerd that
// holds back the inspect and stats calls of one container (a container whose
// Docker calls hang) until released.
type stallProxy struct {
	sock string
	srv  *http.Server

	mu      sync.Mutex
	stuck   string        // full container ID whose calls stall; "" none
	release chan struct{} // closed when the stall ends
	stalled int           // calls held back so far
}

// containerCall matches Docker API paths of one container's inspect and stats.
var containerCall = regexp.MustCompile(`/containers/([0-9a-f]{12,64})/(json|stats)$`)

// startStallProxy serves sock, forwarding to the dockerd on the unix socket
// upstream (streams, hijacked attach/exec connections included).
func startStallProxy(t *testing.T, sock, upstream string) *stallProxy {
	t.Helper()
	p := &stallProxy{sock: sock}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(&url.URL{Scheme: "http", Host: "docker"})
			r.Out.Host = "docker"
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", upstream)
		}},
		FlushInterval: -1, // log follows and the event stream pass at once
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ch := p.stallFor(r.URL.Path); ch != nil {
			select {
			case <-ch:
			case <-r.Context().Done():
				return // the client gave up (its deadline): so does the call
			}
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	t.Cleanup(func() {
		p.unstall()
		_ = p.srv.Close()
	})
	return p
}

// stallFor returns the release channel when path is a stalled container call.
func (p *stallProxy) stallFor(path string) chan struct{} {
	m := containerCall.FindStringSubmatch(path)
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == nil || p.stuck == "" || !strings.HasPrefix(p.stuck, m[1]) {
		return nil
	}
	p.stalled++
	return p.release
}

func (p *stallProxy) stall(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stuck, p.release = id, make(chan struct{})
}

func (p *stallProxy) unstall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stuck != "" {
		close(p.release)
	}
	p.stuck = ""
}

func (p *stallProxy) stalledCalls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stalled
}

// One container whose Docker inspect and stats calls hang (the best-known
// failure of the old dockershim flipped the whole node): the other pods keep
// syncing (a new pod starts, a removed one goes), /healthz stays ok, and the
// stuck container's pod recovers once the stall ends.
func TestIntegrationDockerModeStalledContainer(t *testing.T) {
	n := newNode(t)
	proxy := startStallProxy(t, filepath.Join(n.dir, "docker-proxy.sock"), strings.TrimPrefix(n.s.docker, "unix://"))
	n.runtime = []string{"--container-runtime=docker", "--docker-endpoint=unix://" + proxy.sock}
	n.start()
	for _, name := range []string{"stuck", "other1"} {
		n.writeManifest(name+".yaml", manifest(name, `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`))
	}
	stuck := n.waitPod("stuck", podStartTimeout, "running", runningAndReady)
	n.waitPod("other1", podStartTimeout, "running", runningAndReady)
	id := strings.TrimPrefix(containerStatus(stuck, "app").ContainerID, "docker://")

	// The container dies behind the kubelet's back while its inspect hangs:
	// the next relist has to read the pod's status.
	proxy.stall(id)
	if out, err := n.s.dockerCLI(context.Background(), "kill", id); err != nil {
		t.Fatalf("docker kill: %v: %s", err, out)
	}
	deadline := time.Now().Add(90 * time.Second)
	for proxy.stalledCalls() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no Docker call of the stuck container within 90s: the test did not test a stall")
		}
		time.Sleep(200 * time.Millisecond)
	}
	stalledAt := time.Now()

	n.writeManifest("other2.yaml", manifest("other2", `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`))
	n.removeManifest("other1.yaml")
	n.waitPod("other2", podStartTimeout, "running while another container's calls hang", runningAndReady)
	n.waitNoPod("other1", podStartTimeout)
	t.Logf("with one container stalled: a new pod ran and a removed one went within %s", time.Since(stalledAt).Round(time.Second))
	if body, code, err := n.get("/healthz"); err != nil || code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz while a container's calls hang: %d %q %v", code, body, err)
	}

	proxy.unstall()
	p := n.waitPod("stuck", 3*time.Minute, "running again after the stall", func(p *v1.Pod) bool {
		cs := containerStatus(p, "app")
		return runningAndReady(p) && cs != nil && cs.RestartCount >= 1
	})
	t.Logf("stuck pod recovered after the stall: restartCount %d", containerStatus(p, "app").RestartCount)
}
