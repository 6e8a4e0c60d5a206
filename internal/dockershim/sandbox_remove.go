package dockershim

import (
	"context"
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// RemovePodSandbox removes a sandbox: it makes sure the network is torn down, removes
// the sandbox's containers and the pause container, then the checkpoint. Removing an
// unknown sandbox succeeds.
func (s *Service) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	id, running, err := s.resolveSandboxForTeardown(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if id == "" {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err := s.teardownNetwork(ctx, id, running); err != nil {
		return nil, err
	}
	if err := s.removeSandboxContainers(ctx, id); err != nil {
		return nil, err
	}
	if running.container != nil {
		if err := s.docker.RemoveContainer(ctx, id); err != nil && !errors.Is(err, libdocker.ErrNotFound) {
			return nil, fmt.Errorf("remove sandbox container %s: %w", id, err)
		}
	}
	if err := s.checkpoints.Delete(id); err != nil {
		return nil, fmt.Errorf("delete checkpoint of sandbox %s: %w", id, err)
	}
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// removeSandboxContainers removes every container of a sandbox.
func (s *Service) removeSandboxContainers(ctx context.Context, sandboxID string) error {
	cs, err := s.listManaged(ctx, typeContainer, labelSandboxID+"="+sandboxID)
	if err != nil {
		return fmt.Errorf("list containers of sandbox %s: %w", sandboxID, err)
	}
	for _, c := range cs {
		if err := s.removeContainer(ctx, c.ID); err != nil {
			return fmt.Errorf("remove container %s of sandbox %s: %w", c.ID, sandboxID, err)
		}
	}
	return nil
}
