package streaming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	remotecommand "k8s.io/cri-streaming/pkg/streaming/remotecommand"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Bounds of the polls that follow an exec's end or its kill.
const (
	execPollInterval = 20 * time.Millisecond
	// exitCodeWait bounds the wait for Docker to mark a finished exec as not running.
	exitCodeWait = 5 * time.Second
	// killWait bounds the wait for an exec's PID to appear, and the kill itself.
	killWait = 2 * time.Second
)

// ExecParams describes one command run by Exec.
type ExecParams struct {
	// ContainerID is the Docker container to run in. Required.
	ContainerID string
	// Cmd is the command and its arguments. Required.
	Cmd []string
	// Stdin, when set, is copied to the process; its EOF closes the process's stdin.
	// Exec does not wait for a Stdin read that outlives the process.
	Stdin io.Reader
	// Stdout and Stderr receive the output; nil discards it. With TTY everything
	// goes to Stdout.
	Stdout, Stderr io.Writer
	// TTY allocates a terminal for the process.
	TTY bool
	// Resize delivers terminal sizes (TTY only); nil means none.
	Resize <-chan remotecommand.TerminalSize
	// Timeout kills the process after this long; zero means no timeout.
	Timeout time.Duration
}

// Exec runs p.Cmd in a container, copying stdio, until it exits, and returns its exit
// code. When ctx is cancelled or p.Timeout (>0) elapses, it kills the exec'd process
// (Docker has no exec-kill API: it sends SIGKILL to the host PID that InspectExec
// reports) and returns an error wrapping ErrExecTimeout (timeout) or ctx.Err(). The
// exit code is -1 whenever the error is not nil.
func Exec(ctx context.Context, d Docker, p ExecParams) (exitCode int, err error) {
	if err := p.validate(); err != nil {
		return -1, err
	}
	execID, err := d.CreateExec(ctx, p.ContainerID, libdocker.ExecOptions{
		Cmd:          p.Cmd,
		Tty:          p.TTY,
		AttachStdin:  p.Stdin != nil,
		AttachStdout: true,
		AttachStderr: true,
	})
	if err != nil {
		return -1, fmt.Errorf("exec %q in container %s: %w", p.Cmd, p.ContainerID, err)
	}
	runCtx, cancel := withTimeout(ctx, p.Timeout)
	defer cancel()
	resp, err := d.StartExec(runCtx, execID, p.TTY)
	if err != nil {
		if runCtx.Err() != nil {
			return -1, stopExec(ctx, d, execID, p, nil)
		}
		return -1, fmt.Errorf("exec %q in container %s: %w", p.Cmd, p.ContainerID, err)
	}
	defer resp.Close()

	done := make(chan struct{})
	defer close(done)
	if p.TTY && p.Resize != nil {
		resize := func(h, w uint) error { return d.ResizeExecTTY(runCtx, execID, h, w) }
		go func() {
			defer logging.HandleCrash(nil, "exec resize")
			resizeLoop(done, p.Resize, resize, func(error) {})
		}()
	}
	if p.Stdin != nil {
		go func() {
			defer logging.HandleCrash(nil, "exec stdin")
			_ = copyInput(&resp, p.Stdin, true)
		}()
	}
	outDone := make(chan error, 1)
	go func() {
		defer logging.HandleCrash(nil, "exec output")
		outDone <- copyOutput(&resp, p.TTY, p.Stdout, p.Stderr)
	}()

	select {
	case err := <-outDone:
		if err != nil && runCtx.Err() == nil {
			return -1, fmt.Errorf("exec %q in container %s: read output: %w", p.Cmd, p.ContainerID, err)
		}
	case <-runCtx.Done():
		return -1, stopExec(ctx, d, execID, p, func() { resp.Close(); <-outDone })
	}
	return waitExitCode(runCtx, ctx, d, execID, p)
}

// withTimeout derives the context an exec runs under.
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, timeout, ErrExecTimeout)
}

// stopExec kills the exec once its run context is done, runs release (which frees
// the stream) and returns the error Exec reports: ctx.Err() when the caller's context
// ended, ErrExecTimeout otherwise.
func stopExec(ctx context.Context, d Docker, execID string, p ExecParams, release func()) error {
	killCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killWait)
	defer cancel()
	killErr := killExec(killCtx, d, execID)
	if release != nil {
		release()
	}
	cause := ctx.Err()
	if cause == nil {
		cause = fmt.Errorf("%w after %s", ErrExecTimeout, p.Timeout)
	}
	err := fmt.Errorf("exec %q in container %s: %w", p.Cmd, p.ContainerID, cause)
	if killErr != nil {
		return errors.Join(err, fmt.Errorf("kill exec %s: %w", execID, killErr))
	}
	return err
}

// killExec SIGKILLs the exec's process. Docker marks an exec running before it
// knows its PID, so it polls until the PID is known or the exec has ended.
func killExec(ctx context.Context, d Docker, execID string) error {
	for {
		ins, err := d.InspectExec(ctx, execID)
		if err != nil {
			return err
		}
		if ins.Pid > 0 {
			if !ins.Running {
				return nil // already exited
			}
			return killProcess(ins.Pid)
		}
		if err := sleepCtx(ctx, execPollInterval); err != nil {
			return fmt.Errorf("exec %s has no PID yet: %w", execID, err)
		}
	}
}

// waitExitCode returns the exit code of a finished exec. Its output stream ends just
// before Docker records the exit, so it polls briefly until the exec is not running.
// A runCtx ending meanwhile is handled like during the run.
func waitExitCode(runCtx, ctx context.Context, d Docker, execID string, p ExecParams) (int, error) {
	deadline := time.Now().Add(exitCodeWait)
	for {
		ins, err := d.InspectExec(runCtx, execID)
		if runCtx.Err() != nil {
			return -1, stopExec(ctx, d, execID, p, nil)
		}
		if err != nil {
			return -1, fmt.Errorf("exec %q in container %s: %w", p.Cmd, p.ContainerID, err)
		}
		if !ins.Running {
			return ins.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return -1, fmt.Errorf("exec %q in container %s: output ended but the exec is still running after %s", p.Cmd, p.ContainerID, exitCodeWait)
		}
		if err := sleepCtx(runCtx, execPollInterval); err != nil {
			return -1, stopExec(ctx, d, execID, p, nil)
		}
	}
}

// sleepCtx sleeps for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// exitCodeError reports a non-zero exit code to the streaming library, which checks
// for k8s.io/utils/exec.ExitError (with a type assertion, so it must not be wrapped).
type exitCodeError struct{ code int }

func (e *exitCodeError) Error() string {
	return fmt.Sprintf("command terminated with exit code %d", e.code)
}
func (e *exitCodeError) String() string  { return e.Error() }
func (e *exitCodeError) Exited() bool    { return true }
func (e *exitCodeError) ExitStatus() int { return e.code }
