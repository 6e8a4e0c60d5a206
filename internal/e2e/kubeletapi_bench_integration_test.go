//go:build linux

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/remotecommand"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// BenchmarkKubeletAPI measures the kubelet API through a real control plane of
// its own:
//   - Exec: the round trip of an exec that prints one line, with the real
//     kubectl (`kubectl exec shell -- echo pong`, process start to exit) and
//     with client-go's remotecommand against the API server (SPDY and
//     WebSocket executors, one stream each), p50 and p99 in ms;
//   - StatsSummary50Pods: GET /stats/summary (and ?only_cpu_and_memory=true)
//     on a kept-alive connection with the token of a stats reader, with the 50
//     running pods of a Deployment of busybox sleep on the node, p50 and p99
//     in ms.
//
// Run: go test ./internal/e2e -run '^$' -bench KubeletAPI -benchtime 1x -timeout 20m
func BenchmarkKubeletAPI(b *testing.B) {
	requireSuite(b)
	c := startCluster(b)
	b.Run("Exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			benchExec(b, c)
		}
	})
	b.Run("StatsSummary50Pods", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			benchStatsSummary50(b, c)
		}
	})
}

// latencies runs f rounds times and returns the durations in ms, sorted.
func latencies(b *testing.B, rounds int, f func() error) []float64 {
	b.Helper()
	out := make([]float64, 0, rounds)
	for i := range rounds {
		start := time.Now()
		if err := f(); err != nil {
			b.Fatalf("round %d: %v", i, err)
		}
		out = append(out, float64(time.Since(start).Microseconds())/1000)
	}
	sort.Float64s(out)
	return out
}

// reportLatencies reports the p50 and p99 of sorted latencies (ms) as name-p50-ms and name-p99-ms.
func reportLatencies(b *testing.B, name string, sorted []float64) {
	b.ReportMetric(percentile(sorted, 0.50), name+"-p50-ms")
	b.ReportMetric(percentile(sorted, 0.99), name+"-p99-ms")
	b.Logf("%s: p50 %.1f ms, p99 %.1f ms, min %.1f ms, max %.1f ms over %d rounds",
		name, percentile(sorted, 0.50), percentile(sorted, 0.99), sorted[0], sorted[len(sorted)-1], len(sorted))
}

func benchExec(b *testing.B, c *controlplane.Cluster) {
	n := newAPINode(b, c)
	n.applyYAML(shellYAML())
	n.waitAPIPod("shell", podStartTimeout, "running", runningAndReady)
	const rounds = 30
	b.ResetTimer()
	kubectlLat := latencies(b, rounds, func() error {
		out, stderr, code := n.kubectlResult("", "exec", "shell", "--", "echo", "pong")
		if code != 0 || out != "pong\n" {
			return fmt.Errorf("kubectl exec: exit %d stdout %q stderr %q", code, out, stderr)
		}
		return nil
	})
	cfg, err := clientcmd.BuildConfigFromFlags("", c.AdminKubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	u := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(n.ns).Name("shell").SubResource("exec").
		VersionedParams(&v1.PodExecOptions{Container: "main", Command: []string{"echo", "pong"}, Stdout: true}, scheme.ParameterCodec).URL()
	spdyExec, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
	if err != nil {
		b.Fatal(err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
	if err != nil {
		b.Fatal(err)
	}
	stream := func(e remotecommand.Executor) func() error {
		return func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var out bytes.Buffer
			if err := e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}); err != nil {
				return err
			}
			if out.String() != "pong\n" {
				return fmt.Errorf("stdout %q", out.String())
			}
			return nil
		}
	}
	spdyLat := latencies(b, rounds, stream(spdyExec))
	wsLat := latencies(b, rounds, stream(wsExec))
	b.StopTimer()
	reportLatencies(b, "kubectl-exec", kubectlLat)
	reportLatencies(b, "spdy-exec", spdyLat)
	reportLatencies(b, "websocket-exec", wsLat)
}

func benchStatsSummary50(b *testing.B, c *controlplane.Cluster) {
	n := newAPINode(b, c)
	const pods = 50
	start := time.Now()
	createSleepers(b, n, pods)
	ctx := context.Background()
	n.poll(4*time.Minute, fmt.Sprintf("%d pods of deployment sleepers running on the node", pods), func() (bool, string) {
		list, err := c.Client.CoreV1().Pods(n.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=sleepers"})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for i := range list.Items {
			if list.Items[i].Spec.NodeName == n.name && runningAndReady(&list.Items[i]) {
				running++
			}
		}
		return running == pods, fmt.Sprintf("%d of %d running", running, len(list.Items))
	})
	b.Logf("%d pods running %s after the Deployment was created", pods, time.Since(start).Round(time.Millisecond))

	token := n.serviceAccountToken("stats-reader", statsReaderRules)
	hc := kubeletClient(kubeletCred{})
	hc.Transport.(*http.Transport).DisableKeepAlives = false
	defer hc.CloseIdleConnections()
	get := func(path string) (*statsv1alpha1.Summary, error) {
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", n.apiPort, path), nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %d %.300s", path, resp.StatusCode, body)
		}
		var s statsv1alpha1.Summary
		if err := json.Unmarshal(body, &s); err != nil {
			return nil, fmt.Errorf("decode %s: %w", path, err)
		}
		return &s, nil
	}
	n.poll(60*time.Second, fmt.Sprintf("/stats/summary lists %d pods with CPU", pods), func() (bool, string) {
		s, err := get("/stats/summary")
		if err != nil {
			return false, err.Error()
		}
		withCPU := 0
		for i := range s.Pods {
			if cpu := s.Pods[i].CPU; cpu != nil && cpu.UsageCoreNanoSeconds != nil {
				withCPU++
			}
		}
		return withCPU >= pods, fmt.Sprintf("%d pods, %d with CPU", len(s.Pods), withCPU)
	})

	const rounds = 30
	b.ResetTimer()
	full := latencies(b, rounds, func() error { _, err := get("/stats/summary"); return err })
	small := latencies(b, rounds, func() error { _, err := get("/stats/summary?only_cpu_and_memory=true"); return err })
	b.StopTimer()
	reportLatencies(b, "summary", full)
	reportLatencies(b, "summary-cpu-mem", small)
}

// createSleepers creates Deployment sleepers of replicas busybox pods running sleep.
func createSleepers(b *testing.B, n *clusterNode, replicas int32) {
	b.Helper()
	grace := int64(1)
	labels := map[string]string{"app": "sleepers"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "sleepers", Namespace: n.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: v1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: v1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []v1.Container{{Name: "main", Image: busyboxImage, ImagePullPolicy: v1.PullNever,
						Command: []string{"sleep", "3600"}}},
				},
			},
		},
	}
	if _, err := n.c.Client.AppsV1().Deployments(n.ns).Create(context.Background(), d, metav1.CreateOptions{}); err != nil {
		b.Fatalf("create deployment sleepers: %v", err)
	}
}
