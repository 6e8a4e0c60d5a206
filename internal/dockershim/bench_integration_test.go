//go:build linux

package dockershim_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// benchShim starts a shim for a benchmark (testing.B shares the harness through TB).
func benchShim(b *testing.B) *shim {
	b.Helper()
	return startShim(b, newEnv(b, true))
}

// BenchmarkLifecycleShim: RunPodSandbox + CreateContainer + StartContainer through the
// shim's gRPC socket, with CNI networking; cleanup is outside the timer.
func BenchmarkLifecycleShim(b *testing.B) {
	s := benchShim(b)
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		cfg := s.sandboxConfig(fmt.Sprintf("bench%d", i))
		r, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		c, err := s.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: r.PodSandboxId, Config: containerConfig("c", "sleep", "60"), SandboxConfig: cfg})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := s.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: r.PodSandboxId}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkLifecycleDocker: the same two containers made with the Docker API directly
// (pause with --network none, then a container joining it), no CNI: the floor.
func BenchmarkLifecycleDocker(b *testing.B) {
	requireHost(b)
	dc, err := libdocker.New(libdocker.Options{Endpoint: dockerd.Endpoint()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		sb, err := dc.CreateContainer(ctx, fmt.Sprintf("dsbench_pod_%s_%d", randHex(3), i),
			&libdocker.ContainerConfig{Image: pauseImage, Labels: map[string]string{testLabel: "bench"}},
			&libdocker.HostConfig{NetworkMode: "none", IpcMode: "shareable"})
		if err != nil {
			b.Fatal(err)
		}
		if err := dc.StartContainer(ctx, sb); err != nil {
			b.Fatal(err)
		}
		c, err := dc.CreateContainer(ctx, fmt.Sprintf("dsbench_c_%s_%d", randHex(3), i),
			&libdocker.ContainerConfig{Image: busyboxImage, Cmd: []string{"sleep", "60"}, Labels: map[string]string{testLabel: "bench"}},
			&libdocker.HostConfig{NetworkMode: libdocker.NetworkMode("container:" + sb), IpcMode: libdocker.IpcMode("container:" + sb)})
		if err != nil {
			b.Fatal(err)
		}
		if err := dc.StartContainer(ctx, c); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = dc.RemoveContainer(ctx, c)
		_ = dc.RemoveContainer(ctx, sb)
		b.StartTimer()
	}
}

// BenchmarkPodSandboxStatus measures one PodSandboxStatus round trip.
func BenchmarkPodSandboxStatus(b *testing.B) {
	s := benchShim(b)
	ctx := context.Background()
	cfg := s.sandboxConfig("status")
	r, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { removeSandboxDirect(r.PodSandboxId) })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: r.PodSandboxId}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListContainerStats50 measures ListContainerStats with 50 running containers.
func BenchmarkListContainerStats50(b *testing.B) {
	s := benchShim(b)
	ctx := context.Background()
	cfg := s.sandboxConfig("stats50")
	r, err := s.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { removeSandboxDirect(r.PodSandboxId) })
	for i := 0; i < 50; i++ {
		s.createStart(r.PodSandboxId, cfg, containerConfig(fmt.Sprintf("c%d", i), "sleep", "600"))
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		resp, err := s.rt.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: r.PodSandboxId}})
		if err != nil {
			b.Fatal(err)
		}
		if len(resp.Stats) != 50 {
			b.Fatalf("%d stats, want 50", len(resp.Stats))
		}
	}
}

// BenchmarkPodStats50 measures, with 50 running pods (a sandbox and one container
// each) on an in-process shim, ListPodSandboxStats and the two lists a stats Summary
// asks for next to it, so that a -cpuprofile shows the shim's side.
func BenchmarkPodStats50(b *testing.B) {
	const pods = 50
	s := benchShim(b)
	ctx := context.Background()
	for i := range pods {
		cfg := s.sandboxConfig(fmt.Sprintf("pstats%02d", i))
		sb := s.runSandbox(cfg)
		s.createStart(sb, cfg, containerConfig("c", "sleep", "600"))
	}
	mine := map[string]string{testLabel: s.env.runID}
	for _, sub := range []struct {
		name string
		run  func() (int, error)
	}{
		{"ListPodSandboxStats", func() (int, error) {
			r, err := s.rt.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{LabelSelector: mine}})
			return len(r.GetStats()), err
		}},
		{"ListPodSandbox", func() (int, error) {
			r, err := s.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: mine}})
			return len(r.GetItems()), err
		}},
		{"ListContainers", func() (int, error) {
			r, err := s.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return len(r.GetContainers()), err
		}},
	} {
		b.Run(sub.name, func(b *testing.B) {
			for b.Loop() {
				n, err := sub.run()
				if err != nil {
					b.Fatal(err)
				}
				if n < pods {
					b.Fatalf("%d items, want at least %d", n, pods)
				}
			}
		})
	}
}
