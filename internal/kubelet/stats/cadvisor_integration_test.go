//go:build linux

package stats

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/shim"
)

// BenchmarkCadvisor50Pods measures one /metrics/cadvisor scrape with 50 running
// pods (a pause sandbox and one pause container each, in pod cgroups under a
// private kubepods/besteffort) on a real shim: plain text and gzipped.
func BenchmarkCadvisor50Pods(b *testing.B) { benchmarkCadvisor(b, 50) }

// BenchmarkCadvisor100Pods is the same with 100 pods (the 20 ms budget).
func BenchmarkCadvisor100Pods(b *testing.B) { benchmarkCadvisor(b, 100) }

func benchmarkCadvisor(b *testing.B, pods int) {
	e := startShim(b)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root := fmt.Sprintf("/kstats-cad-%d", os.Getpid())
	b.Cleanup(func() { removeCgroupTree(b, root) })
	start := time.Now()
	startCgroupPods(ctx, b, e, root, pods)
	b.Logf("started %d pods in %v", pods, time.Since(start).Round(time.Millisecond))
	prov, err := New(Options{Runtime: e.rt, Images: e.img, NodeName: "bench-node", RootDir: e.root, PodLogsDir: e.logs,
		PodsCgroup: root + "/kubepods", OOMKills: fakeOOMs{}})
	if err != nil {
		b.Fatal(err)
	}
	h := prov.CadvisorMetrics(CadvisorOptions{SandboxImage: pauseImage})
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	start = time.Now()
	body := getText(b, srv.URL, false)
	b.Logf("cold scrape: %v, %d bytes, %d lines", time.Since(start).Round(time.Microsecond), len(body), strings.Count(body, "\n"))
	if n := strings.Count(body, `container_last_seen{container="pause",`); n != pods {
		b.Fatalf("%d labelled app container rows, want %d", n, pods)
	}
	// The server's share: sampling and writing, without HTTP and the client.
	b.Run("render", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf = h.(*cadvisor).render(ctx, buf[:0])
		}
	})
	for _, gz := range []bool{false, true} {
		name := "text"
		if gz {
			name = "gzip"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				getText(b, srv.URL, gz)
			}
		})
	}
}

// getText GETs /metrics/cadvisor, gzipped or not, and returns the body (as sent).
func getText(tb testing.TB, url string, gz bool) string {
	req, err := http.NewRequest(http.MethodGet, url+"/metrics/cadvisor", nil)
	if err != nil {
		tb.Fatal(err)
	}
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// startCgroupPods starts n pause pods, a few at a time, each with the cgroup
// parent <root>/kubepods/besteffort/pod<uid> (the kubelet's cgroupfs layout).
func startCgroupPods(ctx context.Context, b *testing.B, e *shimEnv, root string, n int) {
	startInParallel(b, n, func(i int) error {
		uid := fmt.Sprintf("cad%d-%d", os.Getpid(), i)
		return runCgroupPod(ctx, b, e, fmt.Sprintf("cad-%02d", i), uid, root+"/kubepods/besteffort/pod"+uid)
	})
}

// runCgroupPod runs a sandbox in cgroup parent and one pause container in it.
func runCgroupPod(ctx context.Context, tb testing.TB, e *shimEnv, name, uid, parent string) error {
	labels := map[string]string{kubelettypes.KubernetesPodNameLabel: name, kubelettypes.KubernetesPodNamespaceLabel: "cad-bench",
		kubelettypes.KubernetesPodUIDLabel: uid}
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "cad-bench", Uid: uid},
		Hostname: name, Labels: labels,
		LogDirectory: filepath.Join(e.logs, "cad-bench_"+name+"_"+uid),
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: parent},
	}
	tb.Cleanup(func() { shim.RemovePodSandboxes(tb, e.rt, uid) })
	id, err := e.rt.RunPodSandbox(ctx, sbConfig, "")
	if err != nil {
		return fmt.Errorf("RunPodSandbox %s: %w", name, err)
	}
	cLabels := map[string]string{kubelettypes.KubernetesContainerNameLabel: "pause"}
	for k, v := range labels {
		cLabels[k] = v
	}
	cid, err := e.rt.CreateContainer(ctx, id, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "pause"}, Image: &runtimeapi.ImageSpec{Image: pauseImage},
		Labels: cLabels, LogPath: "pause/0.log", Linux: &runtimeapi.LinuxContainerConfig{},
	}, sbConfig)
	if err != nil {
		return fmt.Errorf("CreateContainer %s: %w", name, err)
	}
	return e.rt.StartContainer(ctx, cid)
}

// removeCgroupTree removes root's directories from every v1 hierarchy, deepest
// first (the containers' own cgroups are gone with them).
func removeCgroupTree(tb testing.TB, root string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		tb.Log(err)
		return
	}
	defer f.Close()
	m, err := cgroups.ParseMountinfo(f)
	if err != nil {
		tb.Log(err)
		return
	}
	seen := map[string]bool{}
	for _, mnt := range m.V1 {
		top := mnt.Path(root)
		if seen[top] {
			continue
		}
		seen[top] = true
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := os.Remove(d); err != nil {
				tb.Logf("cleanup: %v", err)
			}
		}
	}
}
