package app

import (
	"context"
	"fmt"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/server"
)

// sdNotify is daemon.SdNotify without unsetting the environment.
func sdNotify(state string) (bool, error) { return daemon.SdNotify(false, state) }

// shimOptions maps the configuration onto the dockershim's options.
func shimOptions(cfg *Config, logger *zap.Logger) (dockershim.Options, error) {
	addr, err := cfg.StreamingListenAddr()
	if err != nil {
		return dockershim.Options{}, err
	}
	keyring, err := newNodeKeyring(cfg, logger)
	if err != nil {
		return dockershim.Options{}, err
	}
	return dockershim.Options{
		DockerEndpoint:          cfg.DockerEndpoint,
		PullProgressDeadline:    cfg.ImagePullProgressDeadline,
		RootDirectory:           cfg.DockershimRootDirectory,
		CRIDockerdRootDirectory: cfg.CRIDockerdRootDirectory,
		PodLogsDir:              cfg.Kubelet.PodLogsDir,
		PodInfraImage:           cfg.PodInfraContainerImage,
		SandboxImageKeyring:     keyring,
		NetworkPlugin:           cfg.NetworkPlugin,
		CNIConfDir:              cfg.CNIConfDir,
		CNIBinDirs:              cfg.CNIBinDirs(),
		CNICacheDir:             cfg.CNICacheDir,
		StreamingAddr:           addr,
		StreamIdleTimeout:       cfg.Kubelet.StreamingConnectionIdleTimeout.Duration,
		Logger:                  logger.Named("dockershim"),
	}, nil
}

// startShim builds the dockershim, waits for Docker, starts its gRPC server on
// --container-runtime-endpoint and waits until it serves. With reg, its
// operation metrics join the kubelet's registry. lc closes both at shutdown,
// the server first.
func startShim(ctx context.Context, cfg *Config, reg prometheus.Registerer, lc *lifecycle, logger *zap.Logger) (*server.Server, error) {
	opts, err := shimOptions(cfg, logger)
	if err != nil {
		return nil, err
	}
	unary := []grpc.UnaryServerInterceptor{dockershim.EdgeInterceptor()}
	stream := []grpc.StreamServerInterceptor{dockershim.StreamEdgeInterceptor()}
	if reg != nil {
		// Outside the error mapping, so the metrics see the codes clients see.
		m, err := server.NewMetrics(reg)
		if err != nil {
			return nil, fmt.Errorf("dockershim metrics: %w", err)
		}
		unary = append([]grpc.UnaryServerInterceptor{m.Unary()}, unary...)
		stream = append([]grpc.StreamServerInterceptor{m.Stream()}, stream...)
	}
	svc, err := dockershim.New(opts)
	if err != nil {
		return nil, err
	}
	if err := lc.start("dockershim", func() error { return svc.Start(ctx) }, func() {
		if err := svc.Close(); err != nil {
			logger.Warn("close dockershim", zap.Error(err))
		}
	}); err != nil {
		_ = svc.Close()
		return nil, err
	}
	var srv *server.Server
	err = lc.start("CRI server", func() error {
		srv, err = server.Start(context.WithoutCancel(ctx), server.Options{
			Endpoint: cfg.Kubelet.ContainerRuntimeEndpoint, Runtime: svc, Image: svc, Logger: logger.Named("cri-server"),
			UnaryInterceptors: unary, StreamInterceptors: stream,
		})
		return err
	}, func() {
		if err := srv.Close(); err != nil {
			logger.Warn("close CRI server", zap.Error(err))
		}
	})
	if err != nil {
		return nil, err
	}
	return srv, lc.waitReady(ctx, "CRI server", srv.Ready())
}

// runShimOnly serves the dockershim CRI endpoint until ctx is cancelled (SIGTERM or
// SIGINT) or the server fails, then stops in reverse order.
func runShimOnly(ctx context.Context, cfg *Config, logger *zap.Logger) error {
	lc := newLifecycle(logger)
	defer lc.shutdown()
	srv, err := startShim(ctx, cfg, nil, lc, logger)
	if err != nil {
		return err
	}
	logger.Info("dockershim serving", zap.String("endpoint", cfg.Kubelet.ContainerRuntimeEndpoint))
	notifyReady(logger)
	select {
	case <-ctx.Done():
		logger.Info("shutting down", zap.Error(context.Cause(ctx)))
		return nil
	case err := <-srv.Err():
		logger.Error("CRI server failed", zap.Error(err))
		return err
	}
}
