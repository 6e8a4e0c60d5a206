package dockershim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/checkpoint"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/containerlog"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/netns"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/network"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/podforward"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/streaming"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
	"github.com/kubelet-dockershim/kubelet/internal/oomlog"
)

// dockerClient is the Docker API the shim uses; *libdocker.Client implements it.
type dockerClient interface {
	streaming.Docker
	containerlog.Source
	Ping(ctx context.Context) error
	Version(ctx context.Context) (libdocker.Version, error)
	Info(ctx context.Context) (libdocker.Info, error)
	ListContainers(ctx context.Context, opts libdocker.ListOptions) ([]libdocker.ContainerSummary, error)
	InspectContainerWithSize(ctx context.Context, id string) (libdocker.ContainerJSON, error)
	CreateContainer(ctx context.Context, name string, cfg *libdocker.ContainerConfig, hc *libdocker.HostConfig) (string, error)
	StartContainer(ctx context.Context, id string) error
	StopContainer(ctx context.Context, id string, timeout time.Duration) error
	RemoveContainer(ctx context.Context, id string) error
	UpdateContainer(ctx context.Context, id string, u libdocker.UpdateConfig) error
	ListImages(ctx context.Context, all bool) ([]libdocker.ImageSummary, error)
	InspectImage(ctx context.Context, ref string) (libdocker.ImageInspect, error)
	RemoveImage(ctx context.Context, ref string, force bool) ([]libdocker.ImageDeleteItem, error)
	PullImage(ctx context.Context, ref string, auth *libdocker.AuthConfig) error
	Events(ctx context.Context, opts libdocker.EventsOptions) (<-chan libdocker.EventMessage, <-chan error)
}

// networkPlugin sets up and tears down pod networks; *network.Manager implements it.
type networkPlugin interface {
	Status() error
	SetUpPod(ctx context.Context, pod network.Pod) (*network.Result, error)
	TearDownPod(ctx context.Context, pod network.Pod) error
	CachedIPs(ctx context.Context, sandboxID string) ([]string, error)
	CachedSubnets(ctx context.Context) ([]netip.Prefix, error)
}

// podForward keeps the host's FORWARD chain from dropping the traffic of pod
// subnets; *podforward.Rules implements it.
type podForward interface {
	Allow(ctx context.Context, subnets []netip.Prefix) error
	Run(ctx context.Context, seed func(context.Context) ([]netip.Prefix, error))
}

// noForward writes no rule (tests of parts that set up no network).
type noForward struct{}

func (noForward) Allow(context.Context, []netip.Prefix) error { return nil }
func (noForward) Run(context.Context, func(context.Context) ([]netip.Prefix, error)) {
}

// checkpointStore persists sandbox checkpoints; *checkpoint.Store implements it.
type checkpointStore interface {
	Write(cp *checkpoint.PodSandbox) error
	Read(id string) (*checkpoint.PodSandbox, error)
	Delete(id string) error
	List() ([]string, error)
}

// netnsPins keeps sandboxes' network namespaces alive from CNI ADD to DEL;
// *netns.Pins implements it.
type netnsPins interface {
	Pin(id string, pid int) (string, error)
	Path(id string) string
	Unpin(id string) error
	List() ([]string, error)
}

// noPins pins nothing: CNI gets the pause process's namespace.
type noPins struct{}

func (noPins) Pin(string, int) (string, error) { return "", netns.ErrUnsupported }
func (noPins) Path(string) string              { return "" }
func (noPins) Unpin(string) error              { return nil }
func (noPins) List() ([]string, error)         { return nil, nil }

// defaultPodLogsDir is the kubelet's default podLogsDir.
const defaultPodLogsDir = "/var/log/pods"

// logFollower creates CRI log files and copies container output into them;
// *containerlog.Manager implements it.
type logFollower interface {
	CreateLogFile(dir, path string) error
	Follow(ctx context.Context, containerID, path string, tty bool)
	Reopen(containerID string) error
	Wait(ctx context.Context, containerID string) error
	Stop(containerID string)
}

// streamServer serves exec/attach/port-forward; *streaming.Server implements it.
type streamServer interface {
	Start(ctx context.Context) error
	Close() error
	GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error)
	GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error)
	GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error)
}

// Options configures the shim. DockerEndpoint, RootDirectory, PodInfraImage and
// CNIConfDir are required.
type Options struct {
	DockerEndpoint       string
	PullProgressDeadline time.Duration
	// RootDirectory holds sandbox checkpoints (default /var/lib/dockershim).
	RootDirectory string
	// CRIDockerdRootDirectory is cri-dockerd's --cri-dockerd-root-directory
	// (default /var/lib/cri-dockerd): the sandboxes it created are adopted
	// with the port mappings of its checkpoints. Empty: none are read.
	CRIDockerdRootDirectory string
	// PodInfraImage is the sandbox (pause) image.
	PodInfraImage string
	// SandboxImageKeyring answers the node's registry credentials for the
	// sandbox image's repository (the kubelet's Docker config files and
	// credential providers), as the 1.23 dockershim pulled it. Optional:
	// nil pulls it anonymously.
	SandboxImageKeyring Keyring
	// PodLogsDir is the kubelet's podLogsDir (default /var/log/pods): log
	// files below it are only reached through an os.Root opened on it,
	// following no symbolic link (containerlog.Options.LogRoot).
	PodLogsDir string
	// NetworkPlugin is "cni" (or empty, meaning cni); kubenet is not supported.
	NetworkPlugin string
	CNIConfDir    string
	CNIBinDirs    []string
	CNICacheDir   string
	// StreamingAddr is the streaming server's listen address (default 127.0.0.1:0).
	StreamingAddr string
	// StreamIdleTimeout closes exec, attach and port-forward streams idle
	// for this long (the kubelet's streamingConnectionIdleTimeout, default 4h).
	StreamIdleTimeout time.Duration
	Logger            *zap.Logger
}

// Service is the CRI runtime and image service over Docker.
type Service struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	podInfraImage string
	keyring       Keyring // nil: the sandbox image is pulled anonymously
	rootDir       string
	legacyDirs    []string // foreign checkpoints: this shim's own dir (1.23 format), cri-dockerd's
	logger        *zap.Logger

	docker      dockerClient
	network     networkPlugin
	forward     podForward
	checkpoints checkpointStore
	pins        netnsPins
	logs        logFollower
	streams     streamServer
	events      *eventBroker
	oomLog      kernelOOMLog // nil: the kernel log is not readable here
	stats       *statsCollector
	units       systemdUnits // sets unified resources as unit properties (systemd driver)
	imageLocks  keyLock      // serialises RemoveImage per image ID
	images      imageNames   // what container statuses show of their images
	adoptLocks  keyLock      // serialises the adoption of a sandbox per ID

	host      hostInfo      // immutable after Start
	runConfig runtimeConfig // UpdateRuntimeConfig state

	runCtx    context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	closers   []io.Closer
	bg        sync.WaitGroup // background loops of Start
}

// Validate checks the options and names the offending flag.
func (o *Options) Validate() error {
	switch {
	case o.DockerEndpoint == "":
		return errors.New("--docker-endpoint must not be empty")
	case o.RootDirectory == "":
		return errors.New("--experimental-dockershim-root-directory must not be empty")
	case o.PodLogsDir != "" && !filepath.IsAbs(o.PodLogsDir):
		return fmt.Errorf("podLogsDir %q must be an absolute path", o.PodLogsDir)
	case o.PodInfraImage == "":
		return errors.New("--pod-infra-container-image must not be empty")
	case o.NetworkPlugin == "kubenet":
		return errors.New("--network-plugin=kubenet is not supported by this shim; use cni")
	case o.NetworkPlugin != "" && o.NetworkPlugin != "cni":
		return fmt.Errorf("--network-plugin=%q is not supported; use cni", o.NetworkPlugin)
	case o.CNIConfDir == "":
		return errors.New("--cni-conf-dir must not be empty")
	}
	return nil
}

// New wires the shim's parts. It does not contact Docker; Start does.
func New(opts Options) (*Service, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	dc, err := libdocker.New(libdocker.Options{Endpoint: opts.DockerEndpoint, PullProgressDeadline: opts.PullProgressDeadline})
	if err != nil {
		return nil, err
	}
	netw, err := network.New(network.Options{ConfDir: opts.CNIConfDir, BinDirs: opts.CNIBinDirs, CacheDir: opts.CNICacheDir, Logger: logger.Named("cni")})
	if err != nil {
		return nil, fmt.Errorf("cni: %w", err)
	}
	cps, err := checkpoint.New(filepath.Join(opts.RootDirectory, "sandbox"))
	if err != nil {
		return nil, fmt.Errorf("checkpoints: %w", err)
	}
	pins, err := netns.New(filepath.Join(opts.RootDirectory, "netns"))
	if err != nil {
		return nil, err
	}
	logRoot := opts.PodLogsDir
	if logRoot == "" {
		logRoot = defaultPodLogsDir
	}
	logs, err := containerlog.NewManager(containerlog.Options{Source: dc, LogRoot: logRoot, Logger: logger.Named("logs")})
	if err != nil {
		return nil, err
	}
	addr := opts.StreamingAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	streams, err := streaming.New(streaming.Options{Addr: addr, Docker: dc, StreamIdleTimeout: opts.StreamIdleTimeout, Logger: logger.Named("streaming")})
	if err != nil {
		return nil, fmt.Errorf("streaming: %w", err)
	}
	fw := podforward.New(podforward.Options{Logger: logger.Named("forward")})
	parts := serviceParts{docker: dc, network: netw, forward: fw, checkpoints: cps, pins: pins, logs: logs, streams: streams}
	kmsg, err := oomlog.Open(oomlog.DevKmsg, oomlog.Options{Logger: logger.Named("oomlog")})
	if err != nil {
		logger.Warn("cannot read the kernel log: a container the kernel OOM-kills before Docker watches its memory cgroup is reported as an Error exit", zap.Error(err))
	} else {
		parts.oomLog = kmsg
	}
	s := newService(parts, opts, logger)
	s.closers = append(s.closers, dc)
	if kmsg != nil {
		s.closers = append(s.closers, kmsg)
	}
	return s, nil
}

// legacyCheckpointDirs are where cri-dockerd's and the 1.23 dockershim's
// sandbox checkpoints are read from: this shim's own directory first (the
// 1.23 default root was the same), then cri-dockerd's.
func legacyCheckpointDirs(opts Options) []string {
	dirs := []string{filepath.Join(opts.RootDirectory, "sandbox")}
	if opts.CRIDockerdRootDirectory != "" {
		dirs = append(dirs, filepath.Join(opts.CRIDockerdRootDirectory, "sandbox"))
	}
	return dirs
}

// kernelOOMLog tells which containers the kernel killed a task of for want of
// memory (oomlog.Log).
type kernelOOMLog interface {
	// Run follows the log until ctx ends.
	Run(ctx context.Context) error
	// Killed reads what the kernel logged up to now first.
	Killed(containerID string) bool
}

// serviceParts are the collaborators New builds; tests pass fakes.
type serviceParts struct {
	docker      dockerClient
	network     networkPlugin
	forward     podForward // nil: noForward
	checkpoints checkpointStore
	pins        netnsPins // nil: noPins
	logs        logFollower
	streams     streamServer
	oomLog      kernelOOMLog // nil: none
}

func newService(p serviceParts, opts Options, logger *zap.Logger) *Service {
	s := &Service{
		podInfraImage: opts.PodInfraImage,
		keyring:       opts.SandboxImageKeyring,
		rootDir:       opts.RootDirectory,
		legacyDirs:    legacyCheckpointDirs(opts),
		logger:        logger,
		docker:        p.docker,
		network:       p.network,
		forward:       p.forward,
		checkpoints:   p.checkpoints,
		pins:          p.pins,
		logs:          p.logs,
		streams:       p.streams,
		oomLog:        p.oomLog,
	}
	if s.pins == nil {
		s.pins = noPins{}
	}
	if s.forward == nil {
		s.forward = noForward{}
	}
	s.events = newEventBroker(p.docker, logger.Named("events"))
	s.stats = newStatsCollector(p.docker, logger.Named("stats"))
	return s
}

// Start waits until Docker answers (or ctx ends), reads the host facts, then starts the
// streaming server, the event broker and the log followers of existing containers.
func (s *Service) Start(ctx context.Context) error {
	if err := s.waitForDocker(ctx); err != nil {
		return err
	}
	host, err := s.readHostInfo(ctx)
	if err != nil {
		return err
	}
	s.host = host
	s.runCtx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if err := s.streams.Start(s.runCtx); err != nil {
		s.cancel()
		return fmt.Errorf("start streaming server: %w", err)
	}
	s.events.Start(s.runCtx)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer logging.HandleCrash(s.logger, "pod forwarding")
		s.forward.Run(s.runCtx, s.network.CachedSubnets)
	}()
	if s.oomLog != nil {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			defer logging.HandleCrash(s.logger, "kernel OOM log")
			if err := s.oomLog.Run(s.runCtx); err != nil {
				s.logger.Warn("stopped following the kernel log; OOM kills are read at each status instead", zap.Error(err))
			}
		}()
	}
	if err := s.resumeLogs(ctx); err != nil {
		s.logger.Warn("resume container logs", zap.Error(err))
	}
	s.removeOrphanPins()
	s.logger.Info("dockershim started",
		zap.String("docker-version", host.dockerVersion), zap.String("api-version", host.apiVersion),
		zap.String("cgroup-driver", host.cgroupDriver), zap.Int("min-oom-score-adj", host.minOOMScoreAdj))
	return nil
}

// waitForDocker pings Docker until it answers or ctx ends.
func (s *Service) waitForDocker(ctx context.Context) error {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.docker.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		s.logger.Info("waiting for docker", zap.Error(err))
		select {
		case <-ctx.Done():
			return fmt.Errorf("docker did not answer: %w (last error: %v)", ctx.Err(), err)
		case <-t.C:
		}
	}
}

// Close stops background work and releases the Docker client. It is idempotent.
func (s *Service) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		if err := s.streams.Close(); err != nil {
			errs = append(errs, err)
		}
		s.events.Wait()
		s.bg.Wait()
		for _, c := range s.closers {
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	})
	return errors.Join(errs...)
}

// bgContext is the service's run context, or a background one before Start.
func (s *Service) bgContext() context.Context {
	if s.runCtx != nil {
		return s.runCtx
	}
	return context.Background()
}
