package containerlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Source is the Docker calls this package needs; *libdocker.Client satisfies it.
type Source interface {
	ContainerLogs(ctx context.Context, id string, opts libdocker.LogsOptions) (io.ReadCloser, error)
	// InspectContainer tells, when a log stream ended, whether the container still
	// runs (the stream ended because the daemon stopped) or has exited.
	InspectContainer(ctx context.Context, id string) (libdocker.ContainerJSON, error)
}

// Options configures a Manager.
type Options struct {
	// Source streams container logs from Docker. Required.
	Source Source
	// LogRoot is the directory holding the pods' log directories (the
	// kubelet's podLogsDir, /var/log/pods). Required, absolute. Below it log
	// files are reached through an os.Root opened on it, and no symbolic link
	// is followed; a log path outside it is trusted down to its directory.
	LogRoot string
	// Logger receives copier errors and retries. Nil means no logging.
	Logger *zap.Logger
}

// Defaults of the retry policy after a broken stream.
const (
	defaultMaxRetries   = 5
	defaultRetryBackoff = 500 * time.Millisecond
	defaultMaxBackoff   = 8 * time.Second
)

// Manager runs one log copier per followed container. It is safe for concurrent use.
type Manager struct {
	src     Source
	log     *zap.Logger
	logRoot string

	// Retry policy after a broken stream: at most maxRetries attempts in a row without
	// progress, waiting retryBackoff (doubling up to maxBackoff) between them.
	maxRetries   int
	retryBackoff time.Duration
	maxBackoff   time.Duration

	mu      sync.Mutex
	copiers map[string]*copier // by container ID; only running copiers
}

// NewManager returns a Manager. It starts nothing; copiers start in Follow.
func NewManager(opts Options) (*Manager, error) {
	if opts.Source == nil {
		return nil, errors.New("containerlog: Options.Source is required")
	}
	if !filepath.IsAbs(opts.LogRoot) {
		return nil, fmt.Errorf("containerlog: Options.LogRoot %q must be an absolute path", opts.LogRoot)
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	return &Manager{
		src:          opts.Source,
		log:          log.Named("containerlog"),
		logRoot:      filepath.Clean(opts.LogRoot),
		maxRetries:   defaultMaxRetries,
		retryBackoff: defaultRetryBackoff,
		maxBackoff:   defaultMaxBackoff,
		copiers:      make(map[string]*copier),
	}, nil
}

// Follow starts copying the log stream of containerID into the CRI log file at path,
// resuming after the last timestamp already in path (LastTimestamp). A second call for
// the same container while its copier runs is a no-op. tty=true means Docker's stream is
// raw (not multiplexed) and everything is stdout. The copier stops when the stream ends
// and Docker reports the container exited (a last non-following read then picks up any
// message Docker's follow stream missed), when the container is removed, or when ctx is
// cancelled; pass the manager's run context, not a request context. A stream that ends
// while the container runs (the daemon restarted with live-restore, or the stream broke)
// is resumed after the last line copied, a bounded number of times in a row without
// progress; while the daemon does not answer the copier waits for it. Errors are logged.
// Below the log root no symbolic link on the way to path is followed: the copier stops
// (logged) rather than open, truncate or reopen its file through one.
func (m *Manager) Follow(ctx context.Context, containerID, path string, tty bool) {
	if containerID == "" || path == "" {
		m.log.Error("follow: container ID and log path are required",
			zap.String("container", containerID), zap.String("path", path))
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.copiers[containerID]; ok {
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	c := &copier{
		id:     containerID,
		loc:    locate(path, m.logRoot),
		tty:    tty,
		src:    m.src,
		log:    m.log.With(zap.String("container", containerID), zap.String("path", path)),
		policy: retryPolicy{max: m.maxRetries, backoff: m.retryBackoff, maxBackoff: m.maxBackoff},
		cancel: cancel,
		done:   make(chan struct{}),
	}
	m.copiers[containerID] = c
	go func() {
		defer close(c.done)
		defer cancel()
		defer logging.HandleCrash(c.log, "container log copier")
		c.run(cctx)
		m.mu.Lock()
		if m.copiers[containerID] == c {
			delete(m.copiers, containerID)
		}
		m.mu.Unlock()
	}()
}

func (m *Manager) copier(containerID string) *copier {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.copiers[containerID]
}

// Reopen closes the container's log file and opens the same path again, after the
// kubelet renamed the old file for rotation. It returns nil when no copier runs for
// the container, and an error when the file cannot be reopened (the copier then keeps
// writing to the old file).
func (m *Manager) Reopen(containerID string) error {
	c := m.copier(containerID)
	if c == nil {
		return nil
	}
	if err := c.reopen(); err != nil {
		return fmt.Errorf("containerlog: reopen log of container %s: %w", containerID, err)
	}
	return nil
}

// Wait blocks until the copier of containerID has finished (all output copied) or ctx
// is done. It returns nil at once when no copier runs for the container.
func (m *Manager) Wait(ctx context.Context, containerID string) error {
	c := m.copier(containerID)
	if c == nil {
		return nil
	}
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("containerlog: wait for log copier of container %s: %w", containerID, ctx.Err())
	}
}

// Stop cancels the copier of containerID, if one runs (the container was removed). It
// does not wait for the copier to exit.
func (m *Manager) Stop(containerID string) {
	if c := m.copier(containerID); c != nil {
		c.cancel()
	}
}
