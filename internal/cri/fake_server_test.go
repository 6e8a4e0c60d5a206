package cri

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime answers the RuntimeService calls the tests make; everything else
// is Unimplemented.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	statusDelay  time.Duration // Status sleeps this long (or until cancelled)
	sandboxDelay time.Duration // RunPodSandbox sleeps this long (or until cancelled)
	// sandboxBudget, when set, gets the time RunPodSandbox's deadline left it.
	sandboxBudget chan time.Duration
}

func (fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1.0.0", RuntimeApiVersion: "v1"}, nil
}

func (fakeRuntime) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{{
		Id: "c1", PodSandboxId: "s1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image: &runtimeapi.ImageSpec{Image: "busybox"}, ImageRef: "sha256:1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, CreatedAt: 1,
	}}}, nil
}

func (fakeRuntime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return nil, status.Errorf(codes.NotFound, "container %q not found", req.ContainerId)
}

func (f fakeRuntime) Status(ctx context.Context, _ *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	if err := sleep(ctx, f.statusDelay); err != nil {
		return nil, err
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: true},
	}}}, nil
}

func (f fakeRuntime) RunPodSandbox(ctx context.Context, _ *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	if f.sandboxBudget != nil {
		deadline, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("RunPodSandbox without a deadline")
		}
		f.sandboxBudget <- time.Until(deadline)
	}
	if err := sleep(ctx, f.sandboxDelay); err != nil {
		return nil, err
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: "s1"}, nil
}

// fakeImages answers ImageFsInfo (cri-client's validation call) and ListImages.
type fakeImages struct {
	runtimeapi.UnimplementedImageServiceServer
}

func (fakeImages) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}

func (fakeImages) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{{Id: "sha256:1", RepoTags: []string{"busybox:latest"}, Size: 1}}}, nil
}

// sleep waits d or until ctx ends, returning ctx's error as a gRPC status.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// socketPath returns a path for a unix socket in a short temporary directory
// (t.TempDir paths can exceed the 108-byte sun_path limit).
func socketPath(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "cri")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return filepath.Join(dir, "cri.sock")
}

// serveFake serves rt and images (either may be nil) on the unix socket at
// path until the test ends.
func serveFake(t *testing.T, path string, rt runtimeapi.RuntimeServiceServer, images runtimeapi.ImageServiceServer) {
	t.Helper()
	stop, err := startFake(path, rt, images)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
}

// startFake serves rt and images (either may be nil) on the unix socket at
// path until stop is called.
func startFake(path string, rt runtimeapi.RuntimeServiceServer, images runtimeapi.ImageServiceServer) (stop func(), err error) {
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	if rt != nil {
		runtimeapi.RegisterRuntimeServiceServer(srv, rt)
	}
	if images != nil {
		runtimeapi.RegisterImageServiceServer(srv, images)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	return func() {
		srv.Stop()
		<-done
	}, nil
}
