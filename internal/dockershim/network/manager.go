package network

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"go.uber.org/zap"
)

const (
	// defaultIfName is the pod's interface in its netns.
	defaultIfName = "eth0"
	// cleanupTimeout bounds the DEL that undoes a failed ADD; it runs on a
	// context of its own so a cancelled request still releases everything.
	cleanupTimeout = time.Minute
	// statusTimeout bounds the plugin VERSION calls made to validate a
	// changed configuration from Status, which has no context.
	statusTimeout = 30 * time.Second
	// retryAfterError is how long a failed load is trusted when nothing
	// changed on disk, in case the failure was transient.
	retryAfterError = 5 * time.Second
)

// Options configures a Manager.
type Options struct {
	// ConfDir holds the network configurations, for example /etc/cni/net.d.
	// The default network is its first *.conflist, *.conf or *.json file in
	// lexical order that parses and whose plugins are installed.
	ConfDir string
	// BinDirs are searched, in order, for plugin binaries.
	BinDirs []string
	// CacheDir is libcni's cache of ADD results, for example /var/lib/cni/cache.
	CacheDir string
	// Logger receives structured logs; nil means no logging.
	Logger *zap.Logger
}

// Manager sets up and tears down pod networks. It is safe for concurrent use.
type Manager struct {
	confDir string
	binDirs []string
	log     *zap.Logger
	cni     libcni.CNI
	locks   *keyedLock
	now     func() time.Time

	confMu sync.Mutex
	conf   confState

	loMu   sync.Mutex
	loConf *libcni.PluginConfig
}

// confState is the last load of the default network.
type confState struct {
	stamp    string
	loadedAt time.Time
	net      *network
	err      error
}

// New validates opts and returns a Manager. It does no I/O.
func New(opts Options) (*Manager, error) {
	if opts.ConfDir == "" {
		return nil, errors.New("network: Options.ConfDir is required")
	}
	if len(opts.BinDirs) == 0 {
		return nil, errors.New("network: Options.BinDirs is required")
	}
	for i, d := range opts.BinDirs {
		if d == "" {
			return nil, fmt.Errorf("network: Options.BinDirs[%d] is empty", i)
		}
	}
	if opts.CacheDir == "" {
		return nil, errors.New("network: Options.CacheDir is required")
	}
	log := opts.Logger
	if log == nil {
		log = zap.NewNop()
	}
	binDirs := append([]string(nil), opts.BinDirs...)
	return &Manager{
		confDir: opts.ConfDir,
		binDirs: binDirs,
		log:     log,
		cni:     libcni.NewCNIConfigWithCacheDir(binDirs, opts.CacheDir, nil),
		locks:   newKeyedLock(),
		now:     time.Now,
	}, nil
}

// Status returns nil when a usable default network is configured, else an
// error whose text is the reason. It re-reads the configuration only when
// the conf dir, one of its files or a plugin dir changed.
func (m *Manager) Status() error {
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	_, err := m.defaultNetwork(ctx)
	return err
}

// defaultNetwork returns the default network, reloading it when the files
// it depends on changed.
func (m *Manager) defaultNetwork(ctx context.Context) (*network, error) {
	stamp := dirStamp(m.confDir, m.binDirs)
	m.confMu.Lock()
	defer m.confMu.Unlock()
	cur := m.conf
	if cur.stamp == stamp && (cur.err == nil || m.now().Sub(cur.loadedAt) < retryAfterError) {
		return cur.net, cur.err
	}
	net, err := selectDefault(ctx, m.confDir, m.validate)
	if ctx.Err() != nil {
		// Interrupted: keep the previous state rather than caching a
		// failure that says nothing about the configuration.
		return nil, fmt.Errorf("loading the default network: %w", ctx.Err())
	}
	m.conf = confState{stamp: stamp, loadedAt: m.now(), net: net, err: err}
	m.logConfChange(cur, m.conf)
	return net, err
}

// validate checks that every plugin of list is installed and supports the
// list's CNI version.
func (m *Manager) validate(ctx context.Context, list *libcni.NetworkConfigList) error {
	_, err := m.cni.ValidateNetworkList(ctx, list)
	return err
}

func (m *Manager) logConfChange(old, cur confState) {
	switch {
	case cur.err != nil:
		if old.err == nil || old.err.Error() != cur.err.Error() {
			m.log.Warn("no usable CNI network config", zap.String("conf-dir", m.confDir), zap.Error(cur.err))
		}
	case old.net == nil || old.net.file != cur.net.file || old.net.list.Name != cur.net.list.Name:
		m.log.Info("using CNI network config",
			zap.String("file", cur.net.file),
			zap.String("network", cur.net.list.Name),
			zap.String("cni-version", cur.net.list.CNIVersion))
	}
}

func (m *Manager) podLogger(pod Pod) *zap.Logger {
	return m.log.With(
		zap.String("pod-id", pod.ID),
		zap.String("pod-name", pod.Name),
		zap.String("pod-namespace", pod.Namespace))
}

// runtimeConf is the invocation of the default network for pod.
func runtimeConf(pod Pod) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID:    pod.ID,
		NetNS:          pod.NetNS,
		IfName:         defaultIfName,
		Args:           cniArgs(pod),
		CapabilityArgs: capabilityArgs(pod),
	}
}
