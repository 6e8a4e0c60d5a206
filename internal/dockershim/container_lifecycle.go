package dockershim

import (
	"context"
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// StartContainer starts a created container and begins copying its output into its
// CRI log file.
func (s *Service) StartContainer(ctx context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	j, err := s.inspect(ctx, "container_id", req.GetContainerId(), typeContainer)
	if err != nil {
		return nil, err
	}
	logPath := j.Config.Labels[labelLogPath]
	if err := ensureLogFile(s.logs, j.Config.Labels[labelLogDirectory], logPath); err != nil {
		return nil, err
	}
	if err := s.docker.StartContainer(ctx, j.ID); err != nil {
		return nil, fmt.Errorf("start container %s: %w", j.ID, err)
	}
	if label := j.Config.Labels[labelUnified]; label != "" {
		if err := s.applyUnifiedLabel(ctx, j.ID, label); err != nil {
			return nil, err
		}
	}
	if logPath != "" {
		s.logs.Follow(s.bgContext(), j.ID, logPath, j.Config.Tty)
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer stops a container with a grace period (SIGTERM, then SIGKILL). An
// unknown or stopped container succeeds.
func (s *Service) StopContainer(ctx context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	j, err := s.inspect(ctx, "container_id", req.GetContainerId(), typeContainer)
	if errors.Is(err, ErrNotFound) {
		return &runtimeapi.StopContainerResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if j.State != nil && !j.State.Running {
		return &runtimeapi.StopContainerResponse{}, nil
	}
	grace := seconds(req.GetTimeout())
	if err := s.docker.StopContainer(ctx, j.ID, grace); err != nil && !errors.Is(err, libdocker.ErrNotFound) {
		return nil, fmt.Errorf("stop container %s: %w", j.ID, err)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer removes a container (forcibly when it runs). An unknown container
// succeeds.
func (s *Service) RemoveContainer(ctx context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	j, err := s.inspect(ctx, "container_id", req.GetContainerId(), typeContainer)
	if errors.Is(err, ErrNotFound) {
		return &runtimeapi.RemoveContainerResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := s.removeContainer(ctx, j.ID); err != nil {
		return nil, err
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// removeContainer stops the log copier and removes the container by full ID.
func (s *Service) removeContainer(ctx context.Context, id string) error {
	s.logs.Stop(id)
	if err := s.docker.RemoveContainer(ctx, id); err != nil && !errors.Is(err, libdocker.ErrNotFound) {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// UpdateContainerResources changes a container's CPU and memory limits, and
// writes its unified resources into its cgroup when it runs.
func (s *Service) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	j, err := s.inspect(ctx, "container_id", req.GetContainerId(), typeContainer)
	if err != nil {
		return nil, err
	}
	if req.GetLinux() == nil {
		return &runtimeapi.UpdateContainerResourcesResponse{}, nil
	}
	if err := s.docker.UpdateContainer(ctx, j.ID, updateConfigFor(req.GetLinux())); err != nil {
		return nil, fmt.Errorf("update container %s: %w", j.ID, err)
	}
	if unified := req.GetLinux().GetUnified(); len(unified) > 0 {
		if err := s.checkUnifiedHost("linux.unified"); err != nil {
			return nil, err
		}
		if j.State != nil && j.State.Running {
			if err := s.setUnified(ctx, j.ID, j.State.Pid, unified); err != nil {
				return nil, err
			}
		}
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ReopenContainerLog makes the log copier reopen the CRI log file (after the kubelet
// rotated it). The container must be running.
func (s *Service) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	j, err := s.inspect(ctx, "container_id", req.GetContainerId(), typeContainer)
	if err != nil {
		return nil, err
	}
	if j.State == nil || !j.State.Running {
		return nil, fmt.Errorf("%w: container %s is not running", ErrFailedPrecondition, j.ID)
	}
	if err := s.logs.Reopen(j.ID); err != nil {
		return nil, fmt.Errorf("reopen log of container %s: %w", j.ID, err)
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}
