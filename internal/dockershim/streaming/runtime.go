package streaming

import (
	"context"
	"io"

	"go.uber.org/zap"
	cristreaming "k8s.io/cri-streaming/pkg/streaming"
	remotecommand "k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// criRuntime implements the cri-streaming Runtime on Docker. Every operation also
// ends when base is done (the server's Start context, or Close).
type criRuntime struct {
	docker Docker
	logger *zap.Logger
	base   context.Context
}

var _ cristreaming.Runtime = (*criRuntime)(nil)

// bind returns ctx, additionally cancelled when the server stops.
func (r *criRuntime) bind(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(r.base, cancel)
	return ctx, func() { stop(); cancel() }
}

// Exec runs cmd in the container. A non-zero exit code is returned as an error
// implementing k8s.io/utils/exec.ExitError, which the library reports to the client.
func (r *criRuntime) Exec(ctx context.Context, containerID string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	ctx, cancel := r.bind(ctx)
	defer cancel()
	r.logger.Debug("exec", zap.String("container", containerID), zap.Strings("cmd", cmd), zap.Bool("tty", tty))
	// Streams the client did not request are nil interfaces, and stay nil here.
	p := ExecParams{ContainerID: containerID, Cmd: cmd, Stdin: in, Stdout: out, Stderr: errOut, TTY: tty, Resize: resize}
	code, err := Exec(ctx, r.docker, p)
	if err != nil {
		return err
	}
	if code != 0 {
		return &exitCodeError{code: code}
	}
	return nil
}

// Attach connects to the container's main process.
func (r *criRuntime) Attach(ctx context.Context, containerID string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize) error {
	ctx, cancel := r.bind(ctx)
	defer cancel()
	r.logger.Debug("attach", zap.String("container", containerID), zap.Bool("tty", tty))
	p := attachParams{containerID: containerID, stdin: in, stdout: out, stderr: errOut, resize: resize}
	return attach(ctx, r.docker, r.logger, p)
}

// PortForward forwards stream to port inside the sandbox's network namespace.
func (r *criRuntime) PortForward(ctx context.Context, podSandboxID string, port int32, stream io.ReadWriteCloser) error {
	ctx, cancel := r.bind(ctx)
	defer cancel()
	r.logger.Debug("port-forward", zap.String("sandbox", podSandboxID), zap.Int32("port", port))
	return portForward(ctx, r.docker, podSandboxID, port, stream)
}
