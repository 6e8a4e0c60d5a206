package streaming

import (
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// invalid builds an error wrapping ErrInvalidArgument.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// validateStdio checks the stream flags shared by exec and attach.
func validateStdio(stdin, stdout, stderr, tty bool) error {
	if tty && stderr {
		return invalid("tty and stderr cannot both be true")
	}
	if !stdin && !stdout && !stderr {
		return invalid("one of stdin, stdout or stderr must be set")
	}
	return nil
}

func validateExecRequest(req *runtimeapi.ExecRequest) error {
	if req == nil {
		return invalid("nil ExecRequest")
	}
	if req.ContainerId == "" {
		return invalid("missing required container_id")
	}
	if len(req.Cmd) == 0 {
		return invalid("missing required cmd")
	}
	return validateStdio(req.Stdin, req.Stdout, req.Stderr, req.Tty)
}

func validateAttachRequest(req *runtimeapi.AttachRequest) error {
	if req == nil {
		return invalid("nil AttachRequest")
	}
	if req.ContainerId == "" {
		return invalid("missing required container_id")
	}
	return validateStdio(req.Stdin, req.Stdout, req.Stderr, req.Tty)
}

func validatePortForwardRequest(req *runtimeapi.PortForwardRequest) error {
	if req == nil {
		return invalid("nil PortForwardRequest")
	}
	if req.PodSandboxId == "" {
		return invalid("missing required pod_sandbox_id")
	}
	for _, p := range req.Port {
		if err := validatePort(p); err != nil {
			return err
		}
	}
	return nil
}

func validatePort(port int32) error {
	if port <= 0 || port > 65535 {
		return invalid("port %d out of range 1-65535", port)
	}
	return nil
}

// validate checks the required fields of p.
func (p ExecParams) validate() error {
	if p.ContainerID == "" {
		return invalid("missing required container id")
	}
	if len(p.Cmd) == 0 {
		return invalid("missing required cmd")
	}
	if p.Timeout < 0 {
		return invalid("negative timeout %s", p.Timeout)
	}
	return nil
}
