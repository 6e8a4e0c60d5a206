package dockershim

import (
	"context"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CheckpointContainer is not supported: Docker's checkpoint support is experimental,
// needs CRIU and has no export format the kubelet can use.
func (s *Service) CheckpointContainer(context.Context, *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	return nil, unimplemented("CheckpointContainer: the Docker engine offers no CRIU checkpoint export this shim can use")
}

// CheckpointPod is not supported (see CheckpointContainer).
func (s *Service) CheckpointPod(context.Context, *runtimeapi.CheckpointPodRequest) (*runtimeapi.CheckpointPodResponse, error) {
	return nil, unimplemented("CheckpointPod: the Docker engine offers no CRIU checkpoint export this shim can use")
}

// RestorePod is not supported (see CheckpointContainer).
func (s *Service) RestorePod(context.Context, *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	return nil, unimplemented("RestorePod: the Docker engine offers no CRIU restore this shim can use")
}

// ListMetricDescriptors returns no descriptors: the shim serves the CRI stats RPCs, not
// the CRI-native Prometheus metrics (the kubelet then uses its own cAdvisor-free stats).
func (s *Service) ListMetricDescriptors(context.Context, *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return nil, unimplemented("ListMetricDescriptors: CRI-native pod metrics are not provided by this shim; use the CRI stats RPCs")
}

// ListPodSandboxMetrics is not supported (see ListMetricDescriptors).
func (s *Service) ListPodSandboxMetrics(context.Context, *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return nil, unimplemented("ListPodSandboxMetrics: CRI-native pod metrics are not provided by this shim; use the CRI stats RPCs")
}

// StreamPodSandboxMetrics is not supported (see ListMetricDescriptors).
func (s *Service) StreamPodSandboxMetrics(*runtimeapi.StreamPodSandboxMetricsRequest, grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxMetricsResponse]) error {
	return unimplemented("StreamPodSandboxMetrics: CRI-native pod metrics are not provided by this shim; use the CRI stats RPCs")
}
