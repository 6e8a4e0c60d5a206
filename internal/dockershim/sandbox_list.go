package dockershim

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// ListPodSandbox lists sandboxes, filtered by ID (prefix), state and labels. Sandboxes
// whose container is gone but whose checkpoint remains are listed as NOTREADY, so the
// kubelet stops them and their network is torn down.
func (s *Service) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	items, err := s.listSandboxes(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxResponse{Items: items}, nil
}

// StreamPodSandboxes is ListPodSandbox as a stream of chunks.
func (s *Service) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, stream grpc.ServerStreamingServer[runtimeapi.StreamPodSandboxesResponse]) error {
	items, err := s.listSandboxes(stream.Context(), req.GetFilter())
	if err != nil {
		return err
	}
	for _, chunk := range chunks(items, streamChunk) {
		if err := stream.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: chunk}); err != nil {
			return err
		}
	}
	return nil
}

// streamChunk is how many items one Stream* message carries.
const streamChunk = 100

// chunks splits a list for streaming.
func chunks[T any](items []T, n int) [][]T {
	var out [][]T
	for len(items) > n {
		out = append(out, items[:n])
		items = items[n:]
	}
	if len(items) > 0 {
		out = append(out, items)
	}
	return out
}

func (s *Service) listSandboxes(ctx context.Context, f *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	cs, err := s.listManaged(ctx, typeSandbox, selectorFilters(f.GetLabelSelector())...)
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	seen := make(map[string]bool, len(cs))
	var out []*runtimeapi.PodSandbox
	for i := range cs {
		seen[cs[i].ID] = true
		if sb := sandboxFromSummary(&cs[i]); sandboxMatches(sb, f) {
			out = append(out, sb)
		}
	}
	if len(f.GetLabelSelector()) > 0 {
		// Orphans (checkpoints without a container) have no labels: no
		// selector matches them.
		return out, nil
	}
	orphans, err := s.orphanSandboxes(seen)
	if err != nil {
		return nil, err
	}
	for _, sb := range orphans {
		if sandboxMatches(sb, f) {
			out = append(out, sb)
		}
	}
	return out, nil
}

// orphanSandboxes are checkpoints without a container.
func (s *Service) orphanSandboxes(seen map[string]bool) ([]*runtimeapi.PodSandbox, error) {
	ids, err := s.checkpoints.List()
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var out []*runtimeapi.PodSandbox
	for _, id := range ids {
		if seen[id] {
			continue
		}
		cp, err := s.checkpoints.Read(id)
		if err != nil {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id:        id,
			Metadata:  &runtimeapi.PodSandboxMetadata{Name: cp.Name, Namespace: cp.Namespace, Uid: cp.UID},
			State:     runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
			CreatedAt: cp.CreatedAt.UnixNano(),
		})
	}
	return out, nil
}

// sandboxFromSummary builds a list item from Docker's list output (no inspect).
func sandboxFromSummary(c *libdocker.ContainerSummary) *runtimeapi.PodSandbox {
	labels, annotations := splitLabels(c.Labels)
	name := ""
	if len(c.Names) > 0 {
		name = c.Names[0]
	}
	sb := &runtimeapi.PodSandbox{
		Id:             c.ID,
		Metadata:       sandboxMetadataOf(name, c.Labels),
		State:          runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		CreatedAt:      c.Created * 1e9,
		Labels:         labels,
		Annotations:    annotations,
		RuntimeHandler: c.Labels[labelHandler],
	}
	if c.State == "running" {
		sb.State = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return sb
}

// sandboxMatches applies a CRI sandbox filter.
func sandboxMatches(sb *runtimeapi.PodSandbox, f *runtimeapi.PodSandboxFilter) bool {
	if f == nil {
		return true
	}
	if f.Id != "" && !strings.HasPrefix(sb.Id, f.Id) {
		return false
	}
	if f.State != nil && f.State.State != sb.State {
		return false
	}
	return matchLabels(f.LabelSelector, sb.Labels)
}
