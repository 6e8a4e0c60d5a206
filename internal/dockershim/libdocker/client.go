package libdocker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/registry"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Options configures a Client.
type Options struct {
	// Endpoint is the Docker daemon address, e.g. unix:///var/run/docker.sock.
	Endpoint string
	// PullProgressDeadline cancels an image pull that reports no progress for this long.
	// Zero means 1 minute.
	PullProgressDeadline time.Duration
}

// Client is a context-first Docker Engine client. Every method takes the caller's
// context, so cancellation and deadlines reach the daemon.
type Client struct {
	c *client.Client // every call but those of w; connections kept alive
	// w creates and starts containers, each call on a fresh connection; see
	// newHTTPClient.
	w                    *client.Client
	pullProgressDeadline time.Duration
}

// New builds a client for opts.Endpoint with API version negotiation. It does not
// contact the daemon; call Ping for that.
func New(opts Options) (*Client, error) {
	if opts.Endpoint == "" {
		return nil, errors.New("libdocker: endpoint is required")
	}
	c, err := client.NewClientWithOpts(client.WithHTTPClient(newHTTPClient(true)), client.WithHost(opts.Endpoint),
		client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("libdocker: client for %q: %w", opts.Endpoint, err)
	}
	w, err := client.NewClientWithOpts(client.WithHTTPClient(newHTTPClient(false)), client.WithHost(opts.Endpoint),
		client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("libdocker: client for %q: %w", opts.Endpoint, err)
	}
	d := opts.PullProgressDeadline
	if d <= 0 {
		d = time.Minute
	}
	return &Client{c: c, w: w, pullProgressDeadline: d}, nil
}

// newHTTPClient is the HTTP client of Docker calls, with or without kept-alive
// connections. When dockerd stops it closes its listener first and then, for up
// to the containers' stop timeouts, stops them while still serving requests on
// connections that are already open. Over a kept-alive connection the shim
// would go on creating and starting sandboxes and containers in a daemon that is
// about to exit: they die with it (a second restart of every pod) or are killed
// when it starts again (holding up its start). So creates and starts go each on
// a fresh connection, which a stopping daemon refuses as a stopped one does;
// every other call (inspect, list, stats, logs: a pod start makes many) keeps
// its connections. WithHost sets the transport's dialer for the endpoint.
func newHTTPClient(keepAlive bool) *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: !keepAlive}, CheckRedirect: client.CheckRedirect}
}

// Close releases the client's idle connections.
func (c *Client) Close() error { return errors.Join(c.c.Close(), c.w.Close()) }

// APIVersion returns the negotiated API version (valid after the first call).
func (c *Client) APIVersion() string { return c.c.ClientVersion() }

// wrap maps Docker errors to the package sentinels, keeping the original text.
func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case client.IsErrNotFound(err) || cerrdefs.IsNotFound(err):
		return fmt.Errorf("docker %s: %w: %w", op, ErrNotFound, err)
	case cerrdefs.IsConflict(err):
		return fmt.Errorf("docker %s: %w: %w", op, ErrConflict, err)
	}
	return fmt.Errorf("docker %s: %w", op, err)
}

// Ping checks that the daemon answers and negotiates the API version.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.c.Ping(ctx)
	if err != nil {
		return wrap("ping", err)
	}
	c.c.NegotiateAPIVersion(ctx)
	return nil
}

// Version returns the daemon's version.
func (c *Client) Version(ctx context.Context) (Version, error) {
	v, err := c.c.ServerVersion(ctx)
	return v, wrap("version", err)
}

// Info returns the daemon's system information.
func (c *Client) Info(ctx context.Context) (Info, error) {
	i, err := c.c.Info(ctx)
	return i, wrap("info", err)
}

// ListContainers lists containers.
func (c *Client) ListContainers(ctx context.Context, opts ListOptions) ([]ContainerSummary, error) {
	l, err := c.c.ContainerList(ctx, opts)
	return l, wrap("list containers", err)
}

// InspectContainer inspects one container.
func (c *Client) InspectContainer(ctx context.Context, id string) (ContainerJSON, error) {
	j, err := c.c.ContainerInspect(ctx, id)
	return j, wrap("inspect container "+id, err)
}

// InspectContainerWithSize inspects one container and computes its writable layer size
// (expensive on the daemon side: cache the result).
func (c *Client) InspectContainerWithSize(ctx context.Context, id string) (ContainerJSON, error) {
	j, _, err := c.c.ContainerInspectWithRaw(ctx, id, true)
	return j, wrap("inspect container size "+id, err)
}

// CreateContainer creates a container and returns its ID.
func (c *Client) CreateContainer(ctx context.Context, name string, cfg *ContainerConfig, hc *HostConfig) (string, error) {
	r, err := c.w.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		return "", wrap("create container "+name, err)
	}
	return r.ID, nil
}

// StartContainer starts a container.
func (c *Client) StartContainer(ctx context.Context, id string) error {
	return wrap("start container "+id, c.w.ContainerStart(ctx, id, container.StartOptions{}))
}

// StopContainer stops a container, killing it after timeout, and returns once
// the daemon's container list shows it stopped.
//
// Docker 23 and later answer the stop as soon as the container's state
// changes, while the daemon's exit handler still holds the container's lock
// and has yet to update the view its list reads; 20.10 answered after the
// handler. An inspect waits for that lock, so one after the stop restores the
// order: a stopped sandbox is NOTREADY in the next ListPodSandbox. The
// inspect's own error is ignored: the stop has succeeded.
func (c *Client) StopContainer(ctx context.Context, id string, timeout time.Duration) error {
	secs := int(timeout / time.Second)
	if secs < 0 {
		secs = 0
	}
	if err := c.c.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}); err != nil {
		return wrap("stop container "+id, err)
	}
	_, _ = c.c.ContainerInspect(ctx, id)
	return nil
}

// KillContainer sends a signal to a container's init process.
func (c *Client) KillContainer(ctx context.Context, id, signal string) error {
	return wrap("kill container "+id, c.c.ContainerKill(ctx, id, signal))
}

// RemoveContainer removes a container and its anonymous volumes, forcibly.
func (c *Client) RemoveContainer(ctx context.Context, id string) error {
	return wrap("remove container "+id, c.c.ContainerRemove(ctx, id, container.RemoveOptions{RemoveVolumes: true, Force: true}))
}

// UpdateContainer changes a container's resources.
func (c *Client) UpdateContainer(ctx context.Context, id string, u UpdateConfig) error {
	_, err := c.c.ContainerUpdate(ctx, id, u)
	return wrap("update container "+id, err)
}

// ContainerLogs streams a container's logs. Unless the container has a TTY the stream
// is multiplexed: split it with DemuxStream.
func (c *Client) ContainerLogs(ctx context.Context, id string, opts LogsOptions) (io.ReadCloser, error) {
	r, err := c.c.ContainerLogs(ctx, id, opts)
	return r, wrap("logs "+id, err)
}

// AttachContainer attaches to a container's stdio.
func (c *Client) AttachContainer(ctx context.Context, id string, opts AttachOptions) (HijackedResponse, error) {
	r, err := c.c.ContainerAttach(ctx, id, opts)
	return r, wrap("attach "+id, err)
}

// ResizeContainerTTY resizes a container's TTY.
func (c *Client) ResizeContainerTTY(ctx context.Context, id string, height, width uint) error {
	return wrap("resize "+id, c.c.ContainerResize(ctx, id, container.ResizeOptions{Height: height, Width: width}))
}

// CreateExec creates an exec instance and returns its ID.
func (c *Client) CreateExec(ctx context.Context, containerID string, opts ExecOptions) (string, error) {
	r, err := c.c.ContainerExecCreate(ctx, containerID, opts)
	if err != nil {
		return "", wrap("exec create in "+containerID, err)
	}
	return r.ID, nil
}

// StartExec starts an exec instance and attaches to its stdio.
func (c *Client) StartExec(ctx context.Context, execID string, tty bool) (HijackedResponse, error) {
	r, err := c.c.ContainerExecAttach(ctx, execID, container.ExecAttachOptions{Tty: tty})
	return r, wrap("exec start "+execID, err)
}

// InspectExec inspects an exec instance (its PID, whether it runs, its exit code).
func (c *Client) InspectExec(ctx context.Context, execID string) (ExecInspect, error) {
	r, err := c.c.ContainerExecInspect(ctx, execID)
	return r, wrap("exec inspect "+execID, err)
}

// ResizeExecTTY resizes an exec instance's TTY.
func (c *Client) ResizeExecTTY(ctx context.Context, execID string, height, width uint) error {
	return wrap("exec resize "+execID, c.c.ContainerExecResize(ctx, execID, container.ResizeOptions{Height: height, Width: width}))
}

// ListImages lists images.
func (c *Client) ListImages(ctx context.Context, all bool) ([]ImageSummary, error) {
	l, err := c.c.ImageList(ctx, image.ListOptions{All: all})
	return l, wrap("list images", err)
}

// InspectImage inspects an image by ID or reference.
func (c *Client) InspectImage(ctx context.Context, ref string) (ImageInspect, error) {
	i, err := c.c.ImageInspect(ctx, ref)
	return i, wrap("inspect image "+ref, err)
}

// RemoveImage removes an image (untagging a reference, or deleting by ID).
func (c *Client) RemoveImage(ctx context.Context, ref string, force bool) ([]ImageDeleteItem, error) {
	r, err := c.c.ImageRemove(ctx, ref, image.RemoveOptions{Force: force, PruneChildren: true})
	return r, wrap("remove image "+ref, err)
}

// Events subscribes to the daemon's event stream.
func (c *Client) Events(ctx context.Context, opts EventsOptions) (<-chan EventMessage, <-chan error) {
	return c.c.Events(ctx, opts)
}

// DemuxStream splits Docker's multiplexed stdout/stderr stream.
func DemuxStream(stdout, stderr io.Writer, src io.Reader) (int64, error) {
	return stdcopy.StdCopy(stdout, stderr, src)
}

// pullMessage is one line of Docker's JSON pull progress stream.
type pullMessage struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	ID     string `json:"id"`
	ErrorD *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// PullImage pulls ref, with optional credentials. The pull is cancelled when the daemon
// reports no progress for the progress deadline.
func (c *Client) PullImage(ctx context.Context, ref string, auth *AuthConfig) error {
	opts := image.PullOptions{}
	if auth != nil {
		enc, err := registry.EncodeAuthConfig(*auth)
		if err != nil {
			return fmt.Errorf("docker pull %s: encode auth: %w", ref, err)
		}
		opts.RegistryAuth = enc
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	rc, err := c.c.ImagePull(ctx, ref, opts)
	if err != nil {
		return wrap("pull "+ref, err)
	}
	defer rc.Close()
	return c.followPull(ctx, cancel, ref, rc)
}

// followPull decodes the progress stream, cancelling the pull when it stalls.
func (c *Client) followPull(ctx context.Context, cancel context.CancelCauseFunc, ref string, rc io.Reader) error {
	progress := make(chan struct{}, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer logging.HandleCrash(nil, "image pull progress")
		t := time.NewTimer(c.pullProgressDeadline)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-progress:
				t.Reset(c.pullProgressDeadline)
			case <-t.C:
				cancel(fmt.Errorf("%w for %s", ErrPullStalled, c.pullProgressDeadline))
				return
			}
		}
	}()
	dec := json.NewDecoder(rc)
	for {
		var m pullMessage
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if cause := context.Cause(ctx); cause != nil && errors.Is(cause, ErrPullStalled) {
				return fmt.Errorf("docker pull %s: %w", ref, cause)
			}
			return fmt.Errorf("docker pull %s: read progress: %w", ref, err)
		}
		if m.Error != "" {
			return pullError(ref, m.Error)
		}
		select {
		case progress <- struct{}{}:
		default:
		}
	}
}

// pullError classifies an error reported inside the pull stream.
func pullError(ref, msg string) error {
	if isNotFoundText(msg) {
		return fmt.Errorf("docker pull %s: %w: %s", ref, ErrNotFound, msg)
	}
	return fmt.Errorf("docker pull %s: %s", ref, msg)
}
