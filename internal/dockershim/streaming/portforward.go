package streaming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// portForward connects stream to 127.0.0.1:port inside the network namespace of the
// sandbox container and copies both ways. It returns when the pod side closes the
// connection, when copying fails, or when ctx is done. The client closing its side
// only half-closes the pod connection, so replies still flow back.
func portForward(ctx context.Context, d Docker, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	if sandboxID == "" {
		return invalid("missing required pod sandbox id")
	}
	if err := validatePort(port); err != nil {
		return err
	}
	pid, err := sandboxPID(ctx, d, sandboxID)
	if err != nil {
		return err
	}
	conn, err := dialInNetns(ctx, pid, port)
	if err != nil {
		return fmt.Errorf("port-forward to sandbox %s port %d: %w", sandboxID, port, err)
	}
	defer conn.Close()
	if err := pipe(ctx, conn, stream); err != nil {
		return fmt.Errorf("port-forward to sandbox %s port %d: %w", sandboxID, port, err)
	}
	return nil
}

// sandboxPID returns the host PID of a running sandbox container.
func sandboxPID(ctx context.Context, d Docker, sandboxID string) (int, error) {
	info, err := d.InspectContainer(ctx, sandboxID)
	if err != nil {
		return 0, fmt.Errorf("port-forward to sandbox %s: %w", sandboxID, err)
	}
	if info.ContainerJSONBase == nil || info.State == nil || !info.State.Running || info.State.Pid <= 0 {
		return 0, fmt.Errorf("port-forward to sandbox %s: sandbox container is not running", sandboxID)
	}
	return info.State.Pid, nil
}

// closeWriter is implemented by connections that support half-close.
type closeWriter interface{ CloseWrite() error }

// pipe copies between conn and stream until conn's reading side ends.
func pipe(ctx context.Context, conn net.Conn, stream io.ReadWriter) error {
	toPod := make(chan error, 1)
	go func() {
		defer logging.HandleCrash(nil, "port-forward to pod")
		_, err := io.Copy(conn, stream)
		if err == nil {
			if cw, ok := conn.(closeWriter); ok {
				err = cw.CloseWrite()
			}
		}
		toPod <- err
	}()
	fromPod := make(chan error, 1)
	go func() {
		defer logging.HandleCrash(nil, "port-forward from pod")
		_, err := io.Copy(stream, conn)
		fromPod <- err
	}()
	for {
		select {
		case err := <-fromPod:
			return err
		case err := <-toPod:
			if err != nil && !errors.Is(err, net.ErrClosed) {
				return err
			}
			toPod = nil // client finished sending; wait for the pod's side
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
