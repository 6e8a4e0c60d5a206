//go:build linux

package stats

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	kubelettypes "k8s.io/kubelet/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/shim"
)

const (
	integrationImage = "kubelet-dockershim/busybox:latest"
	pauseImage       = "registry.k8s.io/pause:3.10"
)

// shimEnv is a shim-only instance of the kubelet binary (its own socket and
// network) and CRI clients to it.
type shimEnv struct {
	root string // the kubelet root dir handed to the Provider
	logs string // pod log directories
	rt   internalapi.RuntimeService
	img  internalapi.ImageManagerService
}

// startShim starts an instance and dials it; it fails (never skips) without
// dockerd or the CNI plugins.
func startShim(tb testing.TB) *shimEnv {
	tb.Helper()
	s := kubelet.Start(tb, shim.Options{})
	e := &shimEnv{root: filepath.Join(s.Dir, "kubelet"), logs: filepath.Join(s.Dir, "pod-logs")}
	for _, d := range []string{e.root, e.logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	e.rt, e.img = s.Dial(tb, 2*time.Minute)
	return e
}

// testPod is a pod run straight through the CRI: a sandbox and one container.
type testPod struct {
	name, namespace, uid string
	container            string
	sandboxID            string
}

// runPod starts a sandbox and one container running image with args (the image's
// own entrypoint when args is empty). Cleanup removes the sandbox. It may run on
// any goroutine.
func (e *shimEnv) runPod(ctx context.Context, tb testing.TB, p *testPod, image string, args ...string) error {
	labels := map[string]string{
		kubelettypes.KubernetesPodNameLabel: p.name, kubelettypes.KubernetesPodNamespaceLabel: p.namespace,
		kubelettypes.KubernetesPodUIDLabel: p.uid,
	}
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: p.name, Namespace: p.namespace, Uid: p.uid},
		Hostname:     p.name,
		Labels:       labels,
		LogDirectory: filepath.Join(e.logs, strings.Join([]string{p.namespace, p.name, p.uid}, "_")),
		Linux:        &runtimeapi.LinuxPodSandboxConfig{},
	}
	tb.Cleanup(func() { shim.RemovePodSandboxes(tb, e.rt, p.uid) })
	id, err := e.rt.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		return fmt.Errorf("RunPodSandbox %s: %w", p.name, err)
	}
	p.sandboxID = id
	cLabels := map[string]string{kubelettypes.KubernetesContainerNameLabel: p.container}
	for k, v := range labels {
		cLabels[k] = v
	}
	cConfig := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: p.container},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Labels:   cLabels,
		LogPath:  filepath.Join(p.container, "0.log"),
		Linux:    &runtimeapi.LinuxContainerConfig{},
	}
	if len(args) > 0 {
		cConfig.Command = args
	}
	cid, err := e.rt.CreateContainer(ctx, id, cConfig, sbConfig)
	if err != nil {
		return fmt.Errorf("CreateContainer %s: %w", p.name, err)
	}
	if err := e.rt.StartContainer(ctx, cid); err != nil {
		return fmt.Errorf("StartContainer %s: %w", p.name, err)
	}
	return nil
}

// TestIntegrationSummary runs a busy container through a real shim and dockerd and
// reads it back through Summary, the HTTP handler and /metrics/resource.
func TestIntegrationSummary(t *testing.T) {
	e := startShim(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := &testPod{name: fmt.Sprintf("kstats-%d", os.Getpid()), namespace: "stats-it", container: "busy",
		uid: fmt.Sprintf("kstats-uid-%d-%d", os.Getpid(), time.Now().UnixNano())}
	mustWrite(t, filepath.Join(e.root, "pods", p.uid, "volumes", "kubernetes.io~empty-dir", "data", "blob"), make([]byte, 64*1024))
	// Some CPU work and a log line, then idle.
	if err := e.runPod(ctx, t, p, integrationImage, "sh", "-c",
		"echo started; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done; exec sleep 3600"); err != nil {
		t.Fatal(err)
	}

	desired := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, UID: k8stypes.UID(p.uid)},
		Spec: v1.PodSpec{Volumes: []v1.Volume{{Name: "data"}}}}
	prov, err := New(Options{Runtime: e.rt, Images: e.img, Pods: podList{desired}, NodeName: "stats-node",
		RootDir: e.root, PodLogsDir: e.logs, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}

	// Wait until the loop has run (its second log line) and the pod has CPU and memory.
	var pod *statsapi.PodStats
	var s *statsapi.Summary
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err = prov.Summary(ctx, false)
		if err != nil {
			t.Fatalf("Summary: %v", err)
		}
		pod = findPod(s, p.uid)
		logged, _ := os.ReadFile(filepath.Join(e.logs, strings.Join([]string{p.namespace, p.name, p.uid}, "_"), "busy", "0.log"))
		if pod != nil && len(pod.Containers) == 1 && bytes.Contains(logged, []byte("done")) &&
			ptrVal(pod.Containers[0].CPU.UsageCoreNanoSeconds) > 0 && ptrVal(pod.Containers[0].CPU.UsageNanoCores) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod never showed CPU usage and a rate; last pod stats: %s", dump(pod))
		}
		time.Sleep(time.Second)
	}
	checkIntegrationNode(t, s.Node)
	checkIntegrationPod(t, pod)

	// The HTTP handler: the CPU and memory summary a metrics-server reads.
	srv := httptest.NewServer(prov.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/stats/summary?only_cpu_and_memory=true")
	if err != nil {
		t.Fatal(err)
	}
	var viaHTTP statsapi.Summary
	err = json.NewDecoder(resp.Body).Decode(&viaHTTP)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /stats/summary: %d %v", resp.StatusCode, err)
	}
	if hp := findPod(&viaHTTP, p.uid); hp == nil || ptrVal(hp.CPU.UsageCoreNanoSeconds) == 0 || ptrVal(hp.Memory.WorkingSetBytes) == 0 ||
		hp.Network != nil || viaHTTP.Node.Fs != nil {
		t.Errorf("CPU and memory summary over HTTP: pod %s node fs %v", dump(hp), viaHTTP.Node.Fs)
	}

	text := gatherText(t, prov.ResourceMetrics())
	for _, want := range []string{
		fmt.Sprintf(`container_cpu_usage_seconds_total{container="busy",namespace="stats-it",pod=%q} `, p.name),
		fmt.Sprintf(`container_memory_working_set_bytes{container="busy",namespace="stats-it",pod=%q} `, p.name),
		fmt.Sprintf(`pod_cpu_usage_seconds_total{namespace="stats-it",pod=%q} `, p.name),
		"node_cpu_usage_seconds_total ", "node_memory_working_set_bytes ", "resource_scrape_error 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics/resource lacks %q:\n%s", want, text)
		}
	}
}

func checkIntegrationNode(t *testing.T, n statsapi.NodeStats) {
	t.Helper()
	if n.NodeName != "stats-node" || n.StartTime.IsZero() || n.StartTime.After(time.Now()) {
		t.Errorf("node name %q start %v", n.NodeName, n.StartTime)
	}
	if n.CPU == nil || ptrVal(n.CPU.UsageCoreNanoSeconds) == 0 || n.CPU.UsageNanoCores == nil {
		t.Errorf("node cpu = %s", dump(n.CPU))
	}
	if n.Memory == nil || ptrVal(n.Memory.WorkingSetBytes) == 0 || ptrVal(n.Memory.AvailableBytes) == 0 {
		t.Errorf("node memory = %s", dump(n.Memory))
	}
	if n.Fs == nil || ptrVal(n.Fs.CapacityBytes) == 0 || ptrVal(n.Fs.UsedBytes) == 0 {
		t.Errorf("node fs = %s", dump(n.Fs))
	}
	if n.Runtime == nil || n.Runtime.ImageFs == nil || ptrVal(n.Runtime.ImageFs.UsedBytes) == 0 || ptrVal(n.Runtime.ImageFs.CapacityBytes) == 0 {
		t.Errorf("node runtime = %s", dump(n.Runtime))
	}
	if n.Network == nil || len(n.Network.Interfaces) == 0 {
		t.Errorf("node network = %s", dump(n.Network))
	}
	if n.Rlimit == nil || ptrVal64(n.Rlimit.MaxPID) == 0 || ptrVal64(n.Rlimit.NumOfRunningProcesses) == 0 {
		t.Errorf("node rlimit = %s", dump(n.Rlimit))
	}
}

func checkIntegrationPod(t *testing.T, pod *statsapi.PodStats) {
	t.Helper()
	c := pod.Containers[0]
	if c.Name != "busy" || c.StartTime.IsZero() || ptrVal(c.Memory.WorkingSetBytes) == 0 {
		t.Errorf("container = %s", dump(c))
	}
	if c.Logs == nil || ptrVal(c.Logs.UsedBytes) == 0 {
		t.Errorf("container logs = %s", dump(c.Logs))
	}
	if c.Rootfs == nil || c.Rootfs.UsedBytes == nil || ptrVal(c.Rootfs.CapacityBytes) == 0 {
		t.Errorf("container rootfs = %s", dump(c.Rootfs))
	}
	if pod.CPU == nil || ptrVal(pod.CPU.UsageCoreNanoSeconds) == 0 || pod.Memory == nil || ptrVal(pod.Memory.WorkingSetBytes) == 0 {
		t.Errorf("pod cpu %s memory %s", dump(pod.CPU), dump(pod.Memory))
	}
	if pod.Network == nil || pod.Network.Name != "eth0" {
		t.Errorf("pod network = %s", dump(pod.Network))
	}
	if len(pod.VolumeStats) != 1 || pod.VolumeStats[0].Name != "data" || ptrVal(pod.VolumeStats[0].UsedBytes) < 64*1024 {
		t.Errorf("pod volumes = %s", dump(pod.VolumeStats))
	}
	if pod.EphemeralStorage == nil || ptrVal(pod.EphemeralStorage.UsedBytes) < 64*1024 {
		t.Errorf("pod ephemeral storage = %s", dump(pod.EphemeralStorage))
	}
}

func findPod(s *statsapi.Summary, uid string) *statsapi.PodStats {
	for i := range s.Pods {
		if s.Pods[i].PodRef.UID == uid {
			return &s.Pods[i]
		}
	}
	return nil
}

func ptrVal(v *uint64) uint64 {
	if v == nil {
		return 0
	}
	return *v
}

func ptrVal64(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// BenchmarkSummary50Pods measures Summary with 50 running pods (a pause sandbox and
// one pause container each) on a real shim: the first (cold) full Summary, then warm
// full and CPU-and-memory summaries, the eviction signals' NodeStats,
// /stats/summary over HTTP, and for comparison the
// runtime's ListPodSandboxStats alone.
func BenchmarkSummary50Pods(b *testing.B) {
	const pods = 50
	e := startShim(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	startPods(ctx, b, e, pods)
	b.Logf("started %d pods in %v", pods, time.Since(start).Round(time.Millisecond))
	prov, err := New(Options{Runtime: e.rt, Images: e.img, NodeName: "bench-node", RootDir: e.root, PodLogsDir: e.logs})
	if err != nil {
		b.Fatal(err)
	}
	start = time.Now()
	s, err := prov.Summary(ctx, false)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("cold full Summary: %v", time.Since(start).Round(time.Microsecond))
	if n := countPods(s, "bench"); n != pods {
		b.Fatalf("summary has %d of the %d pods", n, pods)
	}
	for _, sub := range []struct {
		name string
		run  func() error
	}{
		{"full", func() error { _, err := prov.Summary(ctx, false); return err }},
		{"cpu-and-memory", func() error { _, err := prov.Summary(ctx, true); return err }},
		// What the eviction manager samples every 10s without a threshold met.
		{"node-stats", func() error { _, err := prov.NodeStats(ctx); return err }},
		{"http", httpSummary(b, prov)},
		// The runtime's share: the one stats call a Summary waits for.
		{"cri-ListPodSandboxStats", func() error {
			_, err := e.rt.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
			return err
		}},
	} {
		b.Run(sub.name, func(b *testing.B) {
			for b.Loop() {
				if err := sub.run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// startPods starts n pause pods, a few at a time.
func startPods(ctx context.Context, b *testing.B, e *shimEnv, n int) {
	startInParallel(b, n, func(i int) error {
		p := &testPod{name: fmt.Sprintf("bench-%02d", i), namespace: "stats-bench", container: "pause",
			uid: fmt.Sprintf("kstats-bench-%d-%d", os.Getpid(), i)}
		return e.runPod(ctx, b, p, pauseImage)
	})
}

// startInParallel runs start(0..n-1), 4 at a time, and fails b on the first error.
func startInParallel(b *testing.B, n int, start func(i int) error) {
	b.Helper()
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := start(i); err != nil {
				mu.Lock()
				failed = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
}

func countPods(s *statsapi.Summary, prefix string) int {
	n := 0
	for _, p := range s.Pods {
		if strings.HasPrefix(p.PodRef.Name, prefix) && len(p.Containers) == 1 {
			n++
		}
	}
	return n
}

// httpSummary returns a GET of /stats/summary through an httptest server.
func httpSummary(b *testing.B, prov *Provider) func() error {
	srv := httptest.NewServer(prov.Handler())
	b.Cleanup(srv.Close)
	return func() error {
		resp, err := http.Get(srv.URL + "/stats/summary")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var s statsapi.Summary
		if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
}

// TestIntegrationNodeStats: the eviction signals' sample has the node's
// memory, root filesystem, rlimit and the runtime's image filesystem with its
// capacity, and no pods; the image filesystem of this host's dockerd is on the
// same device as a temp root dir, so it is not dedicated.
func TestIntegrationNodeStats(t *testing.T) {
	e := startShim(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prov, err := New(Options{Runtime: e.rt, Images: e.img, NodeName: "stats-node", RootDir: e.root, PodLogsDir: e.logs,
		Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	n, err := prov.NodeStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkIntegrationNode(t, *n)
	if n.Rlimit == nil || n.Rlimit.MaxPID == nil || n.Rlimit.NumOfRunningProcesses == nil ||
		n.Runtime == nil || n.Runtime.ImageFs == nil || ptrVal(n.Runtime.ImageFs.CapacityBytes) == 0 ||
		ptrVal(n.Runtime.ImageFs.AvailableBytes) == 0 {
		t.Errorf("node stats lack what the eviction signals read: %s", dump(n))
	}
	dedicated, err := prov.HasDedicatedImageFs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := deviceOfTest(t, e.root) != deviceOfTest(t, "/var/lib/docker")
	if dedicated != want {
		t.Errorf("HasDedicatedImageFs = %v, want %v", dedicated, want)
	}
}

// deviceOfTest is the device of path's filesystem, read with os.Stat (not
// the code under test).
func deviceOfTest(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("no device for %s", path)
	}
	return uint64(st.Dev)
}
