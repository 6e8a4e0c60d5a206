//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// BenchmarkCluster measures the node against a real control plane of its own:
//   - Apply30: the time from `kubectl apply -f` of 30 pods to each pod Running
//     with all its containers running, as a watch on the API sees it (p50,
//     p99, last);
//   - IdleHeartbeat: the requests per minute an idle node (no pods) sends to
//     the API server over 2 minutes, counted by a TLS proxy between the two,
//     split into nodes, leases and the rest.
//
// Run: go test ./internal/e2e -run '^$' -bench Cluster -benchtime 1x -timeout 20m
func BenchmarkCluster(b *testing.B) {
	requireSuite(b)
	c := startCluster(b)
	b.Run("Apply30", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			benchApply30(b, c)
		}
	})
	b.Run("IdleHeartbeat", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			benchIdleHeartbeat(b, c)
		}
	})
}

func benchApply30(b *testing.B, c *controlplane.Cluster) {
	n := newClusterNode(b, c)
	n.createNamespace()
	n.start()
	n.waitNodeReady(60 * time.Second)
	const pods = 30
	var docs []string
	for i := range pods {
		docs = append(docs, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: p%02d, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`, i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	list, err := c.Client.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	rv := list.ResourceVersion
	w, err := c.Client.CoreV1().Pods(n.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { w.Stop() }()

	b.ResetTimer()
	start := time.Now()
	n.applyYAML(strings.Join(docs, "---\n"))
	applied := time.Since(start)
	running := map[string]float64{}
	last := map[string]*v1.Pod{}
	for len(running) < pods {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok { // the watch ended: resume from the last resource version seen
				if w, err = c.Client.CoreV1().Pods(n.ns).Watch(ctx, metav1.ListOptions{ResourceVersion: rv}); err != nil {
					b.Fatal(err)
				}
				continue
			}
			p, isPod := ev.Object.(*v1.Pod)
			if ev.Type == watch.Error || !isPod {
				b.Fatalf("watch: %v", ev.Object)
			}
			rv = p.ResourceVersion
			last[p.Name] = p
			if _, done := running[p.Name]; !done && p.Spec.NodeName == n.name && p.Status.Phase == v1.PodRunning && allRunning(p) {
				running[p.Name] = time.Since(start).Seconds()
			}
		case <-ctx.Done():
			var notYet []v1.Pod
			for name, p := range last {
				if _, done := running[name]; !done {
					notYet = append(notYet, *p)
				}
			}
			b.Fatalf("%d of %d pods Running after 4 minutes; the others:\n%s", len(running), pods, podsJSON(notYet))
		}
	}
	b.StopTimer()
	lat := make([]float64, 0, pods)
	for _, s := range running {
		lat = append(lat, s)
	}
	sort.Float64s(lat)
	b.ReportMetric(percentile(lat, 0.50), "p50-s")
	b.ReportMetric(percentile(lat, 0.99), "p99-s")
	b.ReportMetric(lat[len(lat)-1], "all-running-s")
	b.ReportMetric(applied.Seconds(), "kubectl-apply-s")
}

func benchIdleHeartbeat(b *testing.B, c *controlplane.Cluster) {
	n := newClusterNode(b, c)
	p := startCountingProxy(b, n)
	writeKubeconfig(b, n.kubeconfig, p.url, c.CAFile, filepath.Join(n.dir, "node.crt"), filepath.Join(n.dir, "node.key"))
	n.start()
	n.waitNodeReady(60 * time.Second)
	time.Sleep(15 * time.Second) // registration and the first syncs are over
	const window = 2 * time.Minute
	b.ResetTimer()
	before := p.snapshot()
	time.Sleep(window)
	after := p.snapshot()
	b.StopTimer()
	if n.kubelet.exited() {
		b.Fatalf("kubelet exited: %v", n.kubelet.err)
	}
	minutes := window.Minutes()
	var total, nodes, leases float64
	var lines []string
	for k, v := range after {
		d := float64(v - before[k])
		if d == 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: %.1f/min", k, d/minutes))
		total += d
		_, res, _ := strings.Cut(k, " ")
		switch {
		case strings.HasPrefix(res, "nodes"):
			nodes += d
		case strings.HasPrefix(res, "leases"):
			leases += d
		}
	}
	sort.Strings(lines)
	b.Logf("idle requests from node %s over %s:\n%s", n.name, window, strings.Join(lines, "\n"))
	b.ReportMetric(total/minutes, "req/min")
	b.ReportMetric(nodes/minutes, "nodes-req/min")
	b.ReportMetric(leases/minutes, "leases-req/min")
}

// countingProxy is a TLS reverse proxy on 127.0.0.1 in front of the API server
// that counts the node's requests by verb and resource. It serves a
// certificate of the cluster CA and forwards with the node's client
// certificate, so the API server sees the node itself.
type countingProxy struct {
	url    string
	mu     sync.Mutex
	counts map[string]int
}

// startCountingProxy starts the proxy for n (closed once n's kubelet stopped).
func startCountingProxy(tb testing.TB, n *clusterNode) *countingProxy {
	tb.Helper()
	ca := n.c.CA(tb)
	srvCert, srvKey := ca.IssueFiles(tb, n.dir, "proxy", testca.Cert{
		CommonName: "127.0.0.1",
		IPs:        []net.IP{net.ParseIP("127.0.0.1")},
		Usage:      []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	serving, err := tls.LoadX509KeyPair(srvCert, srvKey)
	if err != nil {
		tb.Fatal(err)
	}
	client, err := tls.LoadX509KeyPair(filepath.Join(n.dir, "node.crt"), filepath.Join(n.dir, "node.key"))
	if err != nil {
		tb.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	target, err := url.Parse(n.c.APIServer)
	if err != nil {
		tb.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = &http.Transport{
		TLSClientConfig:   &tls.Config{Certificates: []tls.Certificate{client}, RootCAs: roots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}
	rp.FlushInterval = -1 // watches stream
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &countingProxy{url: "https://" + ln.Addr().String(), counts: map[string]int{}}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.count(r)
			rp.ServeHTTP(w, r)
		}),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{serving}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	n.teardown = append(n.teardown, func() { _ = srv.Close() })
	return p
}

func (p *countingProxy) count(r *http.Request) {
	key := requestKey(r)
	p.mu.Lock()
	p.counts[key]++
	p.mu.Unlock()
}

func (p *countingProxy) snapshot() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// requestKey is "<VERB> <resource>[/<subresource>]" of an API request (WATCH
// for watches), e.g. "PATCH nodes/status", "PUT leases", "WATCH pods".
func requestKey(r *http.Request) string {
	verb := r.Method
	if w := r.URL.Query().Get("watch"); w == "true" || w == "1" {
		verb = "WATCH"
	}
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var rest []string
	switch {
	case len(segs) >= 2 && segs[0] == "api":
		rest = segs[2:]
	case len(segs) >= 3 && segs[0] == "apis":
		rest = segs[3:]
	default:
		return verb + " " + r.URL.Path
	}
	if len(rest) > 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	if len(rest) == 0 {
		return verb + " " + r.URL.Path
	}
	res := rest[0]
	if len(rest) >= 3 {
		res += "/" + rest[2]
	}
	return verb + " " + res
}
