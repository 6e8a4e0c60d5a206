package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/app/kubeletconfig"
	"github.com/kubelet-dockershim/kubelet/internal/app/options"
	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/cri"
	"github.com/kubelet-dockershim/kubelet/internal/features"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodestatus"
	"github.com/kubelet-dockershim/kubelet/internal/kubeletserver"
)

// criClients are the kubelet's remote CRI clients.
type criClients struct {
	runtime     internalapi.RuntimeService
	images      internalapi.ImageManagerService
	runtimeName string
}

// runNode runs a kubelet in docker mode (the dockershim started in-process first) or
// remote mode, in the order of the legacy bootstrap: shim -> its gRPC server -> ready
// -> CRI clients (Version checked) -> runtime manager -> kubelet. Every part is
// started through one lifecycle and stopped in reverse; containers keep running.
func runNode(ctx context.Context, cfg *Config, logger *zap.Logger) error {
	kubeletconfig.ApplyReservedCPUs(&cfg.Kubelet, logger)
	fg, err := cfg.FeatureGate()
	if err != nil {
		return err
	}
	cfg.features = fg
	cfg.ApplyGateDefaults(fg)
	if gates := features.NoEffect(cfg.Kubelet.FeatureGates); len(gates) > 0 {
		logger.Warn("These feature gates have no effect in this kubelet", zap.Strings("gates", gates))
	}
	if settings := cfg.NotHonoured(); len(settings) > 0 {
		logger.Warn("Kubelet configuration has no effect: "+strings.Join(settings, ", "), zap.Strings("settings", settings))
	}
	for _, f := range cfg.SkippedDropins() {
		logger.Debug("Skipped file in drop-in directory (does not have .conf extension)", zap.String("file", f))
	}
	if err := prepareProcess(cfg, realHostFiles, logger); err != nil {
		return err
	}
	met, err := newNodeMetrics(cfg, fg)
	if err != nil {
		return err
	}
	reg := met.reg
	lc := newLifecycle(logger)
	defer lc.shutdown()
	if cfg.ContainerRuntime == options.RuntimeDocker {
		if _, err := startShim(ctx, cfg, reg, lc, logger); err != nil {
			return err
		}
	}
	name, err := nodeName(cfg)
	if err != nil {
		return err
	}
	tp, err := newTracerProvider(cfg, name, lc, logger)
	if err != nil {
		return err
	}
	clients, err := dialCRI(ctx, cfg, reg, tp, logger)
	if err != nil {
		return err
	}
	lc.onStop("CRI clients", func() {
		_ = clients.runtime.Close(context.Background())
		_ = clients.images.Close(context.Background())
	})
	if err := checkCgroupDriver(ctx, cfg, clients.runtime, logger); err != nil {
		return err
	}
	if err := met.setNodeName(name); err != nil {
		return err
	}
	conn, err := connectAPIServer(ctx, cfg, name, reg, tp, logger)
	if err != nil {
		return err
	}
	lc.onStop("API connection", conn.close)
	n, err := buildNode(cfg, name, clients, conn, reg, tp, logger)
	if err != nil {
		return err
	}
	return n.run(ctx, cfg, lc, met.gatherer, logger)
}

// dialCRI builds the remote runtime and image clients; each checks Version.
func dialCRI(ctx context.Context, cfg *Config, reg prometheus.Registerer, tp trace.TracerProvider, logger *zap.Logger) (*criClients, error) {
	timeout := cfg.Kubelet.RuntimeRequestTimeout.Duration
	rt, err := cri.NewRuntimeService(ctx, cri.Options{Endpoint: cfg.Kubelet.ContainerRuntimeEndpoint, Timeout: timeout, Registerer: reg,
		TracerProvider: tp, Logger: logger.Named("cri")})
	if err != nil {
		return nil, fmt.Errorf("container runtime at --container-runtime-endpoint=%s: %w", cfg.Kubelet.ContainerRuntimeEndpoint, err)
	}
	img, err := cri.NewImageService(ctx, cri.Options{Endpoint: cfg.ImageEndpoint(), Timeout: timeout, Registerer: reg,
		TracerProvider: tp, Logger: logger.Named("cri")})
	if err != nil {
		_ = rt.Close(ctx)
		return nil, fmt.Errorf("image service at --image-service-endpoint=%s: %w", cfg.ImageEndpoint(), err)
	}
	v, err := rt.Version(ctx, "v1")
	if err != nil {
		return nil, fmt.Errorf("runtime version: %w", err)
	}
	logger.Info("container runtime connected", zap.String("runtime", v.RuntimeName), zap.String("version", v.RuntimeVersion),
		zap.String("cri", v.RuntimeApiVersion), zap.String("endpoint", cfg.Kubelet.ContainerRuntimeEndpoint))
	return &criClients{runtime: rt, images: img, runtimeName: v.RuntimeName}, nil
}

// checkCgroupDriver takes the cgroup driver from the runtime, as upstream's
// kubelet does (KubeletCgroupDriverFromCRI, GA and locked on in 1.37): the
// runtime's RuntimeConfig answer replaces the configured cgroupDriver; a
// runtime that does not implement RuntimeConfig (or answers no Linux part)
// leaves the configuration alone; other errors are retried twice. A driver
// this node cannot use is an error naming both drivers.
func checkCgroupDriver(ctx context.Context, cfg *Config, rt internalapi.RuntimeService, logger *zap.Logger) error {
	var rc *runtimeapi.RuntimeConfigResponse
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if rc, err = rt.RuntimeConfig(ctx); err == nil {
			break
		}
		if status.Code(err) == codes.Unimplemented {
			logger.Info("CRI implementation should be updated to support RuntimeConfig. Falling back to using cgroupDriver from kubelet config.")
			return nil
		}
		if attempt < 2 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Second):
			}
		}
	}
	if err != nil {
		return fmt.Errorf("get the runtime's cgroup driver (RuntimeConfig): %w", err)
	}
	linux := rc.GetLinux()
	if linux == nil {
		return nil
	}
	var theirs string
	switch d := linux.GetCgroupDriver(); d {
	case runtimeapi.CgroupDriver_SYSTEMD:
		theirs = "systemd"
	case runtimeapi.CgroupDriver_CGROUPFS:
		theirs = "cgroupfs"
	default:
		return fmt.Errorf("runtime returned an unknown cgroup driver %d", d)
	}
	if err := cm.DriverUsable(cgroups.Kind(theirs)); err != nil {
		return fmt.Errorf("the runtime uses the %s cgroup driver (the kubelet's configuration says %s), which this node cannot use: %w",
			theirs, cfg.Kubelet.CgroupDriver, err)
	}
	logger.Info("Using cgroup driver setting received from the CRI runtime", zap.String("cgroupDriver", theirs),
		zap.String("configured", cfg.Kubelet.CgroupDriver))
	cfg.Kubelet.CgroupDriver = theirs
	return nil
}

// nodeName is --hostname-override or the lowercased hostname.
func nodeName(cfg *Config) (string, error) {
	if cfg.HostnameOverride != "" {
		return strings.ToLower(strings.TrimSpace(cfg.HostnameOverride)), nil
	}
	h, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("node name: %w", err)
	}
	return strings.ToLower(h), nil
}

// nodeIPs is --node-ip, or the address upstream's kubelet detects for node
// name (nodestatus.DetectNodeIP: the name's address, else the default-route
// interface's), or 127.0.0.1 when there is neither (a standalone node
// without network).
func nodeIPs(cfg *Config, name string) []net.IP {
	if cfg.NodeIP != "" {
		var out []net.IP
		for _, s := range strings.Split(cfg.NodeIP, ",") {
			out = append(out, net.ParseIP(strings.TrimSpace(s)))
		}
		return out
	}
	if ip, err := nodestatus.DetectNodeIP(name); err == nil {
		return []net.IP{ip}
	}
	return []net.IP{net.ParseIP("127.0.0.1")}
}

// healthzAddr is the local endpoint's address, or "" when disabled.
func healthzAddr(cfg *Config) string {
	if *cfg.Kubelet.HealthzPort == 0 {
		return ""
	}
	return net.JoinHostPort(cfg.Kubelet.HealthzBindAddress, fmt.Sprint(*cfg.Kubelet.HealthzPort))
}

// startHealthzServer serves /healthz on the healthz address (nil when the
// port is 0).
func startHealthzServer(ctx context.Context, cfg *Config, health kubeletserver.HealthChecker, logger *zap.Logger) (*kubeletserver.Server, error) {
	addr := healthzAddr(cfg)
	if addr == "" {
		return nil, nil
	}
	return kubeletserver.Start(ctx, kubeletserver.Options{Addr: addr, Health: health, Logger: logger})
}

// localSocketName is the root-only socket under --root-dir that serves
// /healthz, /pods and /metrics to the node's administrator.
const localSocketName = "kubelet-local.sock"

// localSocketPath is <root-dir>/kubelet-local.sock.
func localSocketPath(cfg *Config) string { return filepath.Join(cfg.RootDirectory, localSocketName) }

// startLocalSocket serves /healthz, /pods and /metrics on the root-only local
// socket.
func startLocalSocket(ctx context.Context, cfg *Config, health kubeletserver.HealthChecker, pods kubeletserver.PodLister, reg prometheus.Gatherer, logger *zap.Logger) (*kubeletserver.Server, error) {
	return kubeletserver.StartLocal(ctx, kubeletserver.LocalOptions{Path: localSocketPath(cfg), Health: health, Pods: pods, Gatherer: reg, Logger: logger})
}

// podsDir is <root-dir>/pods.
func podsDir(cfg *Config) string { return filepath.Join(cfg.RootDirectory, "pods") }
