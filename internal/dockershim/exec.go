package dockershim

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/streaming"
)

// maxExecSyncOutput caps ExecSync's captured output per stream (as containerd does).
const maxExecSyncOutput = 16 * 1024 * 1024

// ExecSync runs a command in a running container and returns its output and exit
// code. When the timeout elapses the exec'd process is killed and DeadlineExceeded is
// returned.
func (s *Service) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	j, err := s.runningContainer(ctx, req.GetContainerId())
	if err != nil {
		return nil, err
	}
	if len(req.GetCmd()) == 0 {
		return nil, invalidArg("cmd", "must not be empty")
	}
	stdout, stderr := &cappedBuffer{max: maxExecSyncOutput}, &cappedBuffer{max: maxExecSyncOutput}
	code, err := streaming.Exec(ctx, s.docker, streaming.ExecParams{
		ContainerID: j.ID, Cmd: req.GetCmd(), Stdout: stdout, Stderr: stderr,
		Timeout: seconds(req.GetTimeout()),
	})
	if err != nil {
		if errors.Is(err, streaming.ErrExecTimeout) {
			return nil, fmt.Errorf("command %q timed out after %ds: %w", req.GetCmd(), req.GetTimeout(), err)
		}
		return nil, fmt.Errorf("exec in container %s: %w", j.ID, err)
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: int32(code)}, nil
}

// Exec returns a URL of the streaming server for an interactive exec.
func (s *Service) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if _, err := s.runningContainer(ctx, req.GetContainerId()); err != nil {
		return nil, err
	}
	if len(req.GetCmd()) == 0 {
		return nil, invalidArg("cmd", "must not be empty")
	}
	return s.streams.GetExec(req)
}

// Attach returns a URL of the streaming server to attach to a container.
func (s *Service) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if _, err := s.runningContainer(ctx, req.GetContainerId()); err != nil {
		return nil, err
	}
	return s.streams.GetAttach(req)
}

// PortForward returns a URL of the streaming server to forward ports of a sandbox.
func (s *Service) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	j, err := s.inspect(ctx, "pod_sandbox_id", req.GetPodSandboxId(), typeSandbox)
	if err != nil {
		return nil, err
	}
	if j.State == nil || !j.State.Running {
		return nil, fmt.Errorf("%w: sandbox %s is not running", ErrFailedPrecondition, j.ID)
	}
	return s.streams.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: j.ID, Port: req.GetPort()})
}

// runningContainer resolves a container and checks that it runs.
func (s *Service) runningContainer(ctx context.Context, id string) (*containerRef, error) {
	j, err := s.inspect(ctx, "container_id", id, typeContainer)
	if err != nil {
		return nil, err
	}
	if j.State == nil || !j.State.Running {
		return nil, fmt.Errorf("%w: container %s is not running", ErrFailedPrecondition, j.ID)
	}
	return &containerRef{ID: j.ID}, nil
}

// containerRef is a resolved container.
type containerRef struct{ ID string }

// cappedBuffer keeps at most max bytes and drops the rest.
type cappedBuffer struct {
	bytes.Buffer
	max int
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room < len(p) {
		if room > 0 {
			b.Buffer.Write(p[:room])
		}
		return len(p), nil
	}
	return b.Buffer.Write(p)
}
