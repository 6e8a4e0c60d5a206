package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// The kubelet API (kubectl exec/attach/port-forward/logs/checkpoint) reaches the
// runtime through the methods in this file. Exec, attach and port-forward are
// served by the runtime's own streaming server: the runtime answers the CRI call
// with a one-time URL, which the kubelet's server then proxies.

// ErrLogPathOutsideLogsDir is returned by GetContainerLogs when the runtime reports
// a log path outside the pod logs directory (or not a regular file): the kubelet
// never serves such a file.
var ErrLogPathOutsideLogsDir = errors.New("container log path is outside the pod logs directory")

// GetExec asks the runtime (CRI Exec) for the URL that streams cmd run in the
// container with the given streams.
func (m *Manager) GetExec(ctx context.Context, id kubecontainer.ContainerID, cmd []string, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	resp, err := m.runtime.Exec(ctx, &runtimeapi.ExecRequest{
		ContainerId: id.ID, Cmd: cmd, Tty: tty, Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("exec in container %s: %w", id, err)
	}
	return streamingURL("exec", resp.GetUrl())
}

// GetAttach asks the runtime (CRI Attach) for the URL that streams the
// container's main process. tty must match the container's spec.
func (m *Manager) GetAttach(ctx context.Context, id kubecontainer.ContainerID, stdin, stdout, stderr, tty bool) (*url.URL, error) {
	resp, err := m.runtime.Attach(ctx, &runtimeapi.AttachRequest{
		ContainerId: id.ID, Tty: tty, Stdin: stdin, Stdout: stdout, Stderr: stderr,
	})
	if err != nil {
		return nil, fmt.Errorf("attach to container %s: %w", id, err)
	}
	return streamingURL("attach", resp.GetUrl())
}

// GetPortForward asks the runtime (CRI PortForward) for the URL that forwards
// ports of the pod's ready sandbox. ports may be empty: SPDY clients name the
// ports in their streams.
func (m *Manager) GetPortForward(ctx context.Context, podUID k8stypes.UID, ports []int32) (*url.URL, error) {
	sandboxes, err := m.podSandboxes(ctx, podUID)
	if err != nil {
		return nil, err
	}
	var sandboxID string
	for _, sb := range sandboxes { // newest first
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			sandboxID = sb.GetId()
			break
		}
	}
	if sandboxID == "" {
		return nil, fmt.Errorf("port-forward to pod %s: %w", podUID, errNoReadySandbox)
	}
	resp, err := m.runtime.PortForward(ctx, &runtimeapi.PortForwardRequest{PodSandboxId: sandboxID, Port: ports})
	if err != nil {
		return nil, fmt.Errorf("port-forward to sandbox %s of pod %s: %w", sandboxID, podUID, err)
	}
	return streamingURL("port-forward", resp.GetUrl())
}

// errNoReadySandbox: the pod has no ready sandbox to forward ports to.
var errNoReadySandbox = errors.New("the pod has no ready sandbox")

// streamingURL parses the runtime's streaming URL; only absolute http(s) URLs
// can be proxied.
func streamingURL(op, raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("%s: the runtime returned no streaming URL", op)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: parse the runtime's streaming URL: %w", op, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s: the runtime's streaming URL %q is not an absolute http(s) URL", op, raw)
	}
	return u, nil
}

// GetContainerLogs writes the container's log, as `kubectl logs` asks for it, to
// stdout and stderr (a nil writer drops that stream). The log file is the one
// the runtime reports for the container; it must be a regular file under the pod
// logs directory (ErrLogPathOutsideLogsDir otherwise). A nil opts reads it all.
func (m *Manager) GetContainerLogs(ctx context.Context, id kubecontainer.ContainerID, opts *v1.PodLogOptions, stdout, stderr io.Writer) error {
	resp, err := m.runtime.ContainerStatus(ctx, id.ID, false)
	if err != nil {
		return fmt.Errorf("unable to retrieve container logs for %s: %w", id, err)
	}
	path := resp.GetStatus().GetLogPath()
	if path == "" {
		return fmt.Errorf("container %s has no log path", id)
	}
	if err := m.checkLogPath(path); err != nil {
		return fmt.Errorf("container %s log %q: %w", id, path, err)
	}
	return m.ReadLogs(ctx, path, id.ID, LogOptionsFromPodLogOptions(opts, time.Now()), stdout, stderr)
}

// checkLogPath refuses a log path that leaves the pod logs directory, and a file
// that is not a regular one (a device or FIFO would block or never end).
func (m *Manager) checkLogPath(path string) error {
	root := filepath.Clean(m.logsRoot())
	clean := filepath.Clean(path)
	rel, err := filepath.Rel(root, clean)
	if !filepath.IsAbs(clean) || err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ErrLogPathOutsideLogsDir
	}
	fi, err := os.Stat(clean)
	if err != nil {
		return fmt.Errorf("stat container log: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: not a regular file", ErrLogPathOutsideLogsDir)
	}
	return nil
}

// LogOptionsFromPodLogOptions converts the API's log options as upstream does:
// no tailLines means the whole log, sinceSeconds counts back from now, and the
// later of sinceSeconds and sinceTime wins.
func LogOptionsFromPodLogOptions(o *v1.PodLogOptions, now time.Time) *LogOptions {
	opts := &LogOptions{Tail: -1}
	if o == nil {
		return opts
	}
	if o.TailLines != nil {
		opts.Tail = *o.TailLines
	}
	if o.LimitBytes != nil {
		opts.LimitBytes = *o.LimitBytes
	}
	opts.Follow = o.Follow
	opts.Timestamps = o.Timestamps
	if o.SinceSeconds != nil {
		opts.Since = now.Add(-time.Duration(*o.SinceSeconds) * time.Second)
	}
	if o.SinceTime != nil && o.SinceTime.After(opts.Since) {
		opts.Since = o.SinceTime.Time
	}
	return opts
}

// CheckpointContainer asks the runtime to checkpoint a container into
// req.Location (CRI CheckpointContainer). A runtime without checkpoint support
// answers codes.Unimplemented, which is returned wrapped.
func (m *Manager) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) error {
	if err := m.runtime.CheckpointContainer(ctx, req); err != nil {
		return fmt.Errorf("checkpoint container %s: %w", req.GetContainerId(), err)
	}
	return nil
}
