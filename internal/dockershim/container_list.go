package dockershim

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// ListContainers lists containers, filtered by ID (prefix), state, sandbox and labels.
func (s *Service) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	items, err := s.listContainers(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainersResponse{Containers: items}, nil
}

// StreamContainers is ListContainers as a stream of chunks.
func (s *Service) StreamContainers(req *runtimeapi.StreamContainersRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	items, err := s.listContainers(stream.Context(), req.GetFilter())
	if err != nil {
		return err
	}
	for _, chunk := range chunks(items, streamChunk) {
		if err := stream.Send(&runtimeapi.StreamContainersResponse{Containers: chunk}); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) listContainers(ctx context.Context, f *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	var extra []string
	if f.GetPodSandboxId() != "" && len(f.GetPodSandboxId()) == 64 {
		extra = append(extra, labelSandboxID+"="+f.GetPodSandboxId())
	}
	cs, err := s.listManaged(ctx, typeContainer, append(extra, selectorFilters(f.GetLabelSelector())...)...)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]*runtimeapi.Container, 0, len(cs))
	for i := range cs {
		if c := containerFromSummary(&cs[i]); containerMatches(c, f) {
			out = append(out, c)
		}
	}
	return out, nil
}

// containerFromSummary builds a list item from Docker's list output (no inspect).
func containerFromSummary(c *libdocker.ContainerSummary) *runtimeapi.Container {
	labels, annotations := splitLabels(c.Labels)
	name := ""
	if len(c.Names) > 0 {
		name = c.Names[0]
	}
	image := c.Labels[labelImage]
	if image == "" {
		image = c.Image
	}
	return &runtimeapi.Container{
		Id:           c.ID,
		PodSandboxId: c.Labels[labelSandboxID],
		Metadata:     containerMetadataOf(name, c.Labels),
		Image:        &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: userSpecifiedImage(c.Labels)},
		ImageRef:     c.ImageID,
		ImageId:      c.ImageID,
		State:        summaryState(c.State),
		CreatedAt:    c.Created * 1e9,
		Labels:       labels,
		Annotations:  annotations,
	}
}

// summaryState maps Docker's list state word onto the CRI state.
func summaryState(s string) runtimeapi.ContainerState {
	switch s {
	case "running", "paused", "restarting":
		return runtimeapi.ContainerState_CONTAINER_RUNNING
	case "created":
		return runtimeapi.ContainerState_CONTAINER_CREATED
	case "exited", "dead":
		return runtimeapi.ContainerState_CONTAINER_EXITED
	}
	return runtimeapi.ContainerState_CONTAINER_UNKNOWN
}

// containerMatches applies a CRI container filter.
func containerMatches(c *runtimeapi.Container, f *runtimeapi.ContainerFilter) bool {
	if f == nil {
		return true
	}
	if f.Id != "" && !strings.HasPrefix(c.Id, f.Id) {
		return false
	}
	if f.PodSandboxId != "" && !strings.HasPrefix(c.PodSandboxId, f.PodSandboxId) {
		return false
	}
	if f.State != nil && f.State.State != c.State {
		return false
	}
	return matchLabels(f.LabelSelector, c.Labels)
}
