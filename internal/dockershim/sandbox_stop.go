package dockershim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/checkpoint"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

const (
	// sandboxStopGrace is how long the pause container gets after SIGTERM.
	sandboxStopGrace = 10 * time.Second
	// teardownAttempts bounds the CNI DEL retries within one StopPodSandbox.
	teardownAttempts = 3
)

// StopPodSandbox stops a sandbox: it tears down the pod network (retrying DEL, from the
// cached CNI result when the netns is gone), stops the sandbox's containers, then stops
// the pause container. Stopping an unknown or stopped sandbox succeeds.
func (s *Service) StopPodSandbox(ctx context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	id, running, err := s.resolveSandboxForTeardown(ctx, req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	if id == "" {
		return &runtimeapi.StopPodSandboxResponse{}, nil
	}
	if err := s.teardownNetwork(ctx, id, running); err != nil {
		return nil, err
	}
	if err := s.stopSandboxContainers(ctx, id); err != nil {
		return nil, err
	}
	if running.container != nil {
		if err := s.docker.StopContainer(ctx, id, sandboxStopGrace); err != nil && !errors.Is(err, libdocker.ErrNotFound) {
			return nil, fmt.Errorf("stop sandbox container %s: %w", id, err)
		}
	}
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// sandboxRuntime is what Docker says about a sandbox container.
type sandboxRuntime struct {
	// container is Docker's view, nil when the container is gone (a sandbox
	// another runtime created is adopted from it).
	container *libdocker.ContainerJSON
	netns     string // /proc/<pid>/ns/net while it runs, else ""
}

// resolveSandboxForTeardown finds the full ID of a sandbox from its container or, when
// the container is gone, from its checkpoint. "" means nothing is left to do.
func (s *Service) resolveSandboxForTeardown(ctx context.Context, id string) (string, sandboxRuntime, error) {
	if id == "" {
		return "", sandboxRuntime{}, invalidArg("pod_sandbox_id", "must not be empty")
	}
	j, err := s.inspect(ctx, "pod_sandbox_id", id, typeSandbox)
	if err == nil {
		rt := sandboxRuntime{container: &j}
		if j.State != nil && j.State.Running && j.State.Pid > 0 {
			rt.netns = fmt.Sprintf("/proc/%d/ns/net", j.State.Pid)
		}
		return j.ID, rt, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return "", sandboxRuntime{}, err
	}
	if _, cerr := s.checkpoints.Read(id); cerr == nil {
		return id, sandboxRuntime{}, nil // container gone, checkpoint left: tear down from it
	}
	return "", sandboxRuntime{}, nil
}

// teardownNetwork runs CNI DEL for a sandbox whose checkpoint says the network is set
// up, retrying a few times, then records that it is down. A sandbox another runtime
// created is adopted first (so its DEL runs too). A corrupt checkpoint is logged and
// treated as missing.
func (s *Service) teardownNetwork(ctx context.Context, id string, rt sandboxRuntime) error {
	netns := rt.netns
	var cp *checkpoint.PodSandbox
	var err error
	if rt.container != nil {
		cp, err = s.sandboxCheckpoint(ctx, *rt.container)
	} else {
		cp, err = s.checkpoints.Read(id)
	}
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
		s.unpinNetNS(id)
		return nil
	case errors.Is(err, checkpoint.ErrCorrupt):
		s.logger.Error("corrupt sandbox checkpoint ignored", zap.String("sandbox", id), zap.Error(err))
		s.unpinNetNS(id)
		return nil
	case err != nil:
		return fmt.Errorf("read checkpoint of sandbox %s: %w", id, err)
	}
	if cp.HostNetwork || !cp.NetworkSetUp {
		s.unpinNetNS(id)
		return nil
	}
	// The pinned namespace outlives the pause process: DEL finds the pod's
	// interface (and with it what to undo) even after the process died.
	if pinned := s.pins.Path(id); pinned != "" {
		netns = pinned
	}
	var lastErr error
	for attempt := 0; attempt < teardownAttempts; attempt++ {
		if lastErr = s.network.TearDownPod(ctx, networkPod(cp, netns)); lastErr == nil {
			break
		}
		s.logger.Warn("tear down pod network", zap.String("sandbox", id), zap.Int("attempt", attempt+1), zap.Error(lastErr))
		select {
		case <-ctx.Done():
			return fmt.Errorf("tear down network of sandbox %s: %w", id, ctx.Err())
		case <-time.After(time.Duration(attempt+1) * 200 * time.Millisecond):
		}
	}
	if lastErr != nil {
		return fmt.Errorf("tear down network of sandbox %s: %w", id, lastErr)
	}
	cp.NetworkSetUp = false
	if err := s.checkpoints.Write(cp); err != nil {
		return fmt.Errorf("write checkpoint of sandbox %s: %w", id, err)
	}
	s.unpinNetNS(id)
	return nil
}

// stopSandboxContainers stops every running container of a sandbox.
func (s *Service) stopSandboxContainers(ctx context.Context, sandboxID string) error {
	cs, err := s.listManaged(ctx, typeContainer, labelSandboxID+"="+sandboxID)
	if err != nil {
		return fmt.Errorf("list containers of sandbox %s: %w", sandboxID, err)
	}
	for _, c := range cs {
		if c.State != "running" && c.State != "paused" && c.State != "restarting" {
			continue
		}
		if err := s.docker.StopContainer(ctx, c.ID, sandboxStopGrace); err != nil && !errors.Is(err, libdocker.ErrNotFound) {
			return fmt.Errorf("stop container %s of sandbox %s: %w", c.ID, sandboxID, err)
		}
	}
	return nil
}
