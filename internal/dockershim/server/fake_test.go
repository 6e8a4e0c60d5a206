package server

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const fakeRuntimeName = "fake-docker"

// fakeRuntime answers Version and blocks in Status until the call ends, so
// tests can hold a call in flight.
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	inStatus chan struct{} // receives when Status starts, if non-nil
}

func (f *fakeRuntime) Version(_ context.Context, req *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{
		Version:           req.GetVersion(),
		RuntimeName:       fakeRuntimeName,
		RuntimeVersion:    "20.10.0",
		RuntimeApiVersion: "v1",
	}, nil
}

func (f *fakeRuntime) Status(ctx context.Context, _ *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	if f.inStatus != nil {
		f.inStatus <- struct{}{}
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// fakeImage answers ListImages with about n KiB of image ids, where the
// filter's image reference is "kib:<n>", optionally followed by "|padding"
// that makes the request itself large.
type fakeImage struct {
	runtimeapi.UnimplementedImageServiceServer
}

func (fakeImage) ListImages(_ context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	ref, _, _ := strings.Cut(req.GetFilter().GetImage().GetImage(), "|")
	kib, err := strconv.Atoi(strings.TrimPrefix(ref, "kib:"))
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "bad size reference %q", ref)
	}
	id := strings.Repeat("a", 1024)
	images := make([]*runtimeapi.Image, kib)
	for i := range images {
		images[i] = &runtimeapi.Image{Id: id}
	}
	return &runtimeapi.ListImagesResponse{Images: images}, nil
}

// ContainerStatus panics, as a handler bug would.
func (f *fakeRuntime) ContainerStatus(context.Context, *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	panic("boom")
}

// GetContainerEvents panics, as a streaming handler bug would.
func (f *fakeRuntime) GetContainerEvents(*runtimeapi.GetEventsRequest, runtimeapi.RuntimeService_GetContainerEventsServer) error {
	panic("stream boom")
}
