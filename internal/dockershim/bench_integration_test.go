//go:build linux

package dockershim_test

import (
	"context"
	"fmt"
	"testing"

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
	dc, err := libdocker.New(libdocker.Options{Endpoint: "unix:///var/run/docker.sock"})
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
