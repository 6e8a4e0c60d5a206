// Package devicemanager is the kubelet's side of device plugins (v1beta1):
// the registration service on <root>/device-plugins/kubelet.sock, one client
// per registered resource (GetDevicePluginOptions, ListAndWatch,
// GetPreferredAllocation, Allocate, PreStartContainer), the node's extended
// resources (capacity: every device; allocatable: the healthy ones), the
// allocation of devices to containers at admission, kept in upstream's
// checkpoint (kubelet_internal_checkpoint), and what the runtime passes to a
// container (devices, mounts, environment, annotations).
//
// A plugin that disconnects keeps its devices in the capacity, none
// allocatable, for 5 minutes (upstream's endpointStopGracePeriod); then its
// resource drops to 0. Resources from the checkpoint count 0 until their
// plugin registers again. One plugin serves a resource: a second
// registration replaces the first.
package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/devicemanager/checkpoint"
	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Defaults and upstream's constants.
const (
	// DefaultDir is upstream's device plugin directory.
	DefaultDir = "/var/lib/kubelet/device-plugins"
	// SocketName is the registration socket in Dir.
	SocketName = "kubelet.sock"
	// stopGracePeriod keeps a disconnected plugin's devices in the capacity.
	stopGracePeriod = 5 * time.Minute
	dialTimeout     = 10 * time.Second
	preStartTimeout = pluginapi.KubeletPreStartContainerRPCTimeoutInSecs * time.Second
	allocateTimeout = 30 * time.Second
)

// Resources receives the device resources of the node (resources.Node).
type Resources interface {
	SetDeviceResources(capacity, allocatable v1.ResourceList) error
}

// Options configures a Manager.
type Options struct {
	// Dir holds the registration socket, the plugins' sockets and the
	// checkpoint; default DefaultDir.
	Dir string
	// Resources receives the capacity and allocatable of each device
	// resource (required).
	Resources Resources
	// ActivePods lists the pods whose allocations are kept; the others'
	// devices are freed at the next allocation (required).
	ActivePods func() []*v1.Pod
	// SourcesReady reports whether every pod source has been seen: until
	// then no allocation is freed (pods restored from the checkpoint may not
	// be admitted again yet). nil: always ready.
	SourcesReady func() bool
	// NUMANodes are the machine's NUMA nodes (the topology hints' range
	// when devices name unknown nodes); nil: the devices' own.
	NUMANodes []int
	// Registerer receives upstream's kubelet_device_plugin_* families; nil:
	// not registered.
	Registerer prometheus.Registerer
	// Logger; nil: no logging.
	Logger *zap.Logger
}

// Manager runs the registration service and the plugins' clients.
type Manager struct {
	dir        string
	loops      lifecycle.Loops // what Start began
	resources  Resources
	activePods func() []*v1.Pod
	ready      func() bool
	logger     *zap.Logger
	metrics    *metrics
	now        func() time.Time
	numaNodes  []int

	// allocMu serializes allocations, so that their plugin RPCs
	// (GetPreferredAllocation, Allocate) run without mu: a slow plugin does
	// not hold up container starts, health updates or the PodResources API.
	allocMu   sync.Mutex
	mu        sync.Mutex
	plugins   map[string]*plugin // by resource
	known     map[string]bool    // every resource seen (reported as 0 once gone)
	allocated podAllocations
	runCtx    context.Context
	server    *grpc.Server
}

// plugin is one registered device plugin.
type plugin struct {
	resource string
	endpoint string
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	opts     *pluginapi.DevicePluginOptions
	devices  map[string]*pluginapi.Device
	stopped  time.Time // when its stream ended; zero while connected
	cancel   context.CancelFunc
}

// healthy lists the plugin's healthy device IDs, sorted; none once stopped.
func (p *plugin) healthy() []string {
	if !p.stopped.IsZero() {
		return nil
	}
	out := make([]string, 0, len(p.devices))
	for id, d := range p.devices {
		if d.Health == pluginapi.Healthy {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// New checks opts; Start runs the manager.
func New(opts Options) (*Manager, error) {
	if opts.Resources == nil || opts.ActivePods == nil {
		return nil, errors.New("devicemanager: Options.Resources and ActivePods are required")
	}
	if opts.Dir == "" {
		opts.Dir = DefaultDir
	}
	if !filepath.IsAbs(opts.Dir) {
		return nil, fmt.Errorf("devicemanager: Dir %q must be absolute", opts.Dir)
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	met, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	ready := opts.SourcesReady
	if ready == nil {
		ready = func() bool { return true }
	}
	return &Manager{dir: filepath.Clean(opts.Dir), resources: opts.Resources, activePods: opts.ActivePods, ready: ready, logger: logger, metrics: met,
		now: time.Now, plugins: map[string]*plugin{}, known: map[string]bool{}, allocated: podAllocations{}, numaNodes: opts.NUMANodes}, nil
}

// Start reads the checkpoint, removes stale sockets (so that plugins see the
// new kubelet.sock and register again) and serves registrations until ctx
// ends.
func (m *Manager) Start(ctx context.Context) error {
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return fmt.Errorf("device plugin directory: %w", err)
	}
	m.readCheckpoint()
	if entries, err := os.ReadDir(m.dir); err == nil {
		for _, e := range entries {
			if e.Type()&os.ModeSocket != 0 {
				_ = os.Remove(filepath.Join(m.dir, e.Name()))
			}
		}
	}
	sock := filepath.Join(m.dir, SocketName)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("device plugin registration socket: %w", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, registration{m: m})
	m.mu.Lock()
	m.runCtx, m.server = ctx, srv
	m.mu.Unlock()
	m.publish()
	m.loops.Go(m.logger, "device plugin registration server", func() {
		if err := srv.Serve(l); err != nil {
			m.logger.Error("device plugin registration server", zap.Error(err))
		}
	})
	m.loops.Go(m.logger, "device plugin expiry", func() { m.expireLoop(ctx) })
	m.loops.Go(m.logger, "device plugin registration server stop", func() {
		<-ctx.Done()
		srv.Stop()
		m.mu.Lock()
		for _, p := range m.plugins {
			p.cancel()
			_ = p.conn.Close()
		}
		m.mu.Unlock()
		_ = os.Remove(sock)
	})
	m.logger.Info("Device plugin registration server started", zap.String("socket", sock))
	return nil
}

// Wait returns once the loops Start began have ended (after ctx ended).
func (m *Manager) Wait() { m.loops.Wait() }

// readCheckpoint restores the allocations and the resources known before a
// restart (their capacity is 0 until their plugin registers again).
func (m *Manager) readCheckpoint() {
	entries, registered, err := checkpoint.Read(m.dir)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		m.logger.Warn("Continuing after failing to read the device checkpoint; device allocations may not be up to date", zap.Error(err))
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.allocated.restore(entries)
	for r := range registered {
		m.known[r] = true
	}
}

// registration is the Registration service.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
}

func (r registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	m := r.m
	m.logger.Info("Got registration request from device plugin", zap.String("resourceName", req.ResourceName), zap.String("endpoint", req.Endpoint))
	m.metrics.registrations.WithLabelValues(req.ResourceName).Inc()
	if err := checkRegistration(req, m.dir); err != nil {
		return &pluginapi.Empty{}, err
	}
	if err := m.connect(req.ResourceName, req.Endpoint, req.Options); err != nil {
		m.logger.Error("Error connecting to device plugin client", zap.String("resourceName", req.ResourceName), zap.Error(err))
		return &pluginapi.Empty{}, err
	}
	return &pluginapi.Empty{}, nil
}

// checkRegistration checks a Register request: upstream's API version, an
// extended resource name, and an endpoint that names a socket of the plugin's
// own in dir (not the registration socket or the checkpoint).
func checkRegistration(req *pluginapi.RegisterRequest, dir string) error {
	if req.Version != pluginapi.Version {
		return fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q", req.Version, pluginapi.SupportedVersions)
	}
	if !isExtendedResourceName(req.ResourceName) {
		return fmt.Errorf("the ResourceName %q is invalid", req.ResourceName)
	}
	ep := req.Endpoint
	if ep == "" || ep == "." || ep == ".." || ep != filepath.Base(ep) || ep == SocketName || ep == checkpoint.FileName {
		return fmt.Errorf("invalid endpoint %q: must be the name of a socket in %s", ep, dir)
	}
	return nil
}

// isExtendedResourceName is upstream's check: a qualified name with a
// domain outside kubernetes.io, not a quota "requests." name.
func isExtendedResourceName(name string) bool {
	if !strings.Contains(name, "/") || strings.Contains(name, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(name, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(v1.DefaultResourceRequestsPrefix+name)) == 0
}

// connect dials a plugin, reads its options and follows its ListAndWatch.
func (m *Manager) connect(resourceName, endpoint string, regOpts *pluginapi.DevicePluginOptions) error {
	m.mu.Lock()
	runCtx := m.runCtx
	m.mu.Unlock()
	if runCtx == nil || runCtx.Err() != nil {
		return errors.New("the device manager is not running")
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(m.dir, endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("failed to dial device plugin: %w", err)
	}
	client := pluginapi.NewDevicePluginClient(conn)
	ctx, cancel := context.WithTimeout(runCtx, dialTimeout)
	opts, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	cancel()
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("failed to get device plugin options: %w", err)
	}
	if opts == nil {
		opts = regOpts
	}
	streamCtx, stop := context.WithCancel(runCtx)
	p := &plugin{resource: resourceName, endpoint: endpoint, conn: conn, client: client, opts: opts,
		devices: map[string]*pluginapi.Device{}, cancel: stop}
	m.mu.Lock()
	if old := m.plugins[resourceName]; old != nil {
		old.cancel()
		_ = old.conn.Close()
		p.devices = old.devices
	}
	m.plugins[resourceName] = p
	m.known[resourceName] = true
	m.mu.Unlock()
	go func() {
		defer logging.HandleCrash(m.logger, "device plugin "+resourceName)
		m.watch(streamCtx, p)
	}()
	m.logger.Info("Registered device plugin", zap.String("resourceName", resourceName), zap.String("endpoint", endpoint),
		zap.Bool("preStartRequired", opts.GetPreStartRequired()), zap.Bool("getPreferredAllocationAvailable", opts.GetGetPreferredAllocationAvailable()))
	return nil
}

// watch follows a plugin's ListAndWatch until it ends, then marks the
// plugin stopped (its devices unhealthy) unless a newer one replaced it.
func (m *Manager) watch(ctx context.Context, p *plugin) {
	stream, err := p.client.ListAndWatch(ctx, &pluginapi.Empty{})
	for err == nil {
		var resp *pluginapi.ListAndWatchResponse
		if resp, err = stream.Recv(); err != nil {
			break
		}
		devs := deviceMap(resp)
		m.mu.Lock()
		current := m.plugins[p.resource] == p
		if current {
			p.devices = devs
		}
		m.mu.Unlock()
		if current {
			m.logger.Info("Device plugin updated its devices", zap.String("resourceName", p.resource), zap.Int("devices", len(devs)))
			m.publish()
		}
	}
	m.mu.Lock()
	current := m.plugins[p.resource] == p
	if current {
		p.stopped = m.now()
	}
	m.mu.Unlock()
	if current {
		m.logger.Warn("Device plugin disconnected; its devices are unhealthy", zap.String("resourceName", p.resource), zap.Error(err))
		m.publish()
	}
}

// deviceMap indexes a ListAndWatch answer by device ID; devices without an
// ID are dropped, and of two with one ID the later wins.
func deviceMap(resp *pluginapi.ListAndWatchResponse) map[string]*pluginapi.Device {
	devs := make(map[string]*pluginapi.Device, len(resp.GetDevices()))
	for _, d := range resp.GetDevices() {
		if d != nil && d.ID != "" {
			devs[d.ID] = d
		}
	}
	return devs
}

// expireLoop drops the plugins stopped for longer than the grace period.
func (m *Manager) expireLoop(ctx context.Context) {
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		m.mu.Lock()
		changed := false
		for r, p := range m.plugins {
			if !p.stopped.IsZero() && m.now().Sub(p.stopped) > stopGracePeriod {
				_ = p.conn.Close()
				delete(m.plugins, r)
				changed = true
			}
		}
		m.mu.Unlock()
		if changed {
			m.publish()
		}
	}
}

// Capacity returns the device resources' capacity (every device of a
// connected or recently stopped plugin; 0 for resources gone) and
// allocatable (the healthy devices of connected plugins).
func (m *Manager) Capacity() (capacity, allocatable v1.ResourceList) {
	m.mu.Lock()
	defer m.mu.Unlock()
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	for r := range m.known {
		c, a := 0, 0
		if p := m.plugins[r]; p != nil {
			c, a = len(p.devices), len(p.healthy())
		}
		capacity[v1.ResourceName(r)] = *resource.NewQuantity(int64(c), resource.DecimalSI)
		allocatable[v1.ResourceName(r)] = *resource.NewQuantity(int64(a), resource.DecimalSI)
	}
	return capacity, allocatable
}

// publish hands the current capacity to the node's resources.
func (m *Manager) publish() {
	c, a := m.Capacity()
	if err := m.resources.SetDeviceResources(c, a); err != nil {
		m.logger.Error("Set the device resources of the node", zap.Error(err))
	}
}

// writeCheckpoint stores the allocations and the registered devices; caller
// holds mu.
func (m *Manager) writeCheckpoint() error {
	registered := map[string][]string{}
	for r, p := range m.plugins {
		ids := make([]string, 0, len(p.devices))
		for id := range p.devices {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		registered[r] = ids
	}
	return checkpoint.Write(m.dir, m.allocated.entries(), registered)
}
