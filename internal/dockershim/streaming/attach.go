package streaming

import (
	"context"
	"fmt"
	"io"

	"go.uber.org/zap"
	remotecommand "k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// attachParams describes one attach to a container's main process.
type attachParams struct {
	containerID    string
	stdin          io.Reader
	stdout, stderr io.Writer
	resize         <-chan remotecommand.TerminalSize
}

// attach connects to a running container's stdio until its output ends, stdin ends
// when no output was requested, or ctx is done. Whether the stream is a TTY comes
// from the container's config, not from the request.
func attach(ctx context.Context, d Docker, logger *zap.Logger, p attachParams) error {
	if p.containerID == "" {
		return invalid("missing required container id")
	}
	info, err := d.InspectContainer(ctx, p.containerID)
	if err != nil {
		return fmt.Errorf("attach to container %s: %w", p.containerID, err)
	}
	tty := info.Config != nil && info.Config.Tty
	hasOutput := p.stdout != nil || p.stderr != nil
	resp, err := d.AttachContainer(ctx, p.containerID, libdocker.AttachOptions{
		Stream: true,
		Stdin:  p.stdin != nil,
		Stdout: p.stdout != nil,
		Stderr: p.stderr != nil,
	})
	if err != nil {
		return fmt.Errorf("attach to container %s: %w", p.containerID, err)
	}
	defer resp.Close()

	done := make(chan struct{})
	defer close(done)
	if tty && p.resize != nil {
		resize := func(h, w uint) error { return d.ResizeContainerTTY(ctx, p.containerID, h, w) }
		onErr := func(err error) { logger.Debug("resize failed", zap.String("container", p.containerID), zap.Error(err)) }
		go func() {
			defer logging.HandleCrash(logger, "attach resize")
			resizeLoop(done, p.resize, resize, onErr)
		}()
	}
	// The end of the client's stdin reaches the container only when its
	// stdin is once-only (stdinOnce, no TTY). Otherwise the container's stdin
	// stays open for the next attach, as the CRI says, and Docker must not be
	// told: it would close this attach's output at once, losing what the
	// container still writes (`echo cmd | kubectl debug -i` printed nothing).
	closeStdin := info.Config != nil && info.Config.StdinOnce && !tty
	inDone := make(chan error, 1)
	if p.stdin != nil {
		go func() {
			defer logging.HandleCrash(logger, "attach stdin")
			inDone <- copyInput(&resp, p.stdin, closeStdin)
		}()
	}
	outDone := make(chan error, 1)
	if hasOutput {
		go func() {
			defer logging.HandleCrash(logger, "attach output")
			outDone <- copyOutput(&resp, tty, p.stdout, p.stderr)
		}()
	}
	return waitAttach(ctx, p.containerID, inDone, outDone, hasOutput)
}

// waitAttach waits for the end of an attach session.
func waitAttach(ctx context.Context, id string, inDone, outDone <-chan error, hasOutput bool) error {
	for {
		select {
		case err := <-outDone:
			if err != nil {
				return fmt.Errorf("attach to container %s: read output: %w", id, err)
			}
			return nil
		case err := <-inDone:
			if err != nil {
				return fmt.Errorf("attach to container %s: write input: %w", id, err)
			}
			if !hasOutput {
				return nil
			}
			inDone = nil // stdin is closed; keep streaming the output
		case <-ctx.Done():
			// The client went away or the server is stopping: the session just ends.
			return nil
		}
	}
}
