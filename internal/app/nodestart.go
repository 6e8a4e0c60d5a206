package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/eviction"
	"github.com/kubelet-dockershim/kubelet/internal/kubeletserver"
)

// run starts the node's components through lc in dependency order, runs the
// kubelet's sync loop until ctx ends, and leaves the ordered shutdown to lc
// (pods keep running). The order: the runtime state (checked once before
// anything reads it), the local endpoint and the kubelet API, the runtime
// manager's loops, with an API server its object getters, the node status and
// the status sync, then the pod sources.
func (n *node) run(ctx context.Context, cfg *Config, lc *lifecycle, reg prometheus.Gatherer, logger *zap.Logger) error {
	if err := os.MkdirAll(podsDir(cfg), 0o750); err != nil {
		return fmt.Errorf("--root-dir: %w", err)
	}
	// Whatever the servers start under ctx (authentication caches, serving
	// certificate rotation) ends with the node, after every component.
	ctx, cancel := context.WithCancel(ctx)
	lc.onStop("node context", cancel)
	n.state.Check(ctx)
	lc.run(ctx, "runtime state", n.state.Run)
	// --pod-cidr of a standalone node; the node's spec.podCIDRs follow at
	// every status update.
	if _, err := n.podCIDR.update(ctx, cfg.Kubelet.PodCIDR); err != nil {
		logger.Error("Pod CIDR update failed", zap.Error(err))
	}
	if err := n.startServers(ctx, cfg, lc, reg, logger); err != nil {
		return err
	}
	if err := lc.start("container manager", func() error { return n.cgroups.Start(n.pods.ActivePods()) }, nil); err != nil {
		return err
	}
	lc.run(ctx, "QoS cgroups", func(ctx context.Context) { n.cgroups.Run(ctx, n.pods.ActivePods) })
	if err := lc.start("CPU manager", func() error {
		if err := n.cpus.Start(n.pods.ActivePods, n.sources.SeenAllSources); err != nil {
			return fmt.Errorf("start cpu manager error: %w", err)
		}
		return nil
	}, nil); err != nil {
		return err
	}
	if err := lc.start("device manager", func() error { return n.devices.Start(ctx) }, nil); err != nil {
		return err
	}
	if err := lc.start("pod resources API", func() error { return n.podResources.Start(ctx) }, nil); err != nil {
		return err
	}
	if err := lc.start("plugin watcher", func() error { return n.plugins.Start(ctx) }, nil); err != nil {
		return err
	}
	lc.run(ctx, "CSINode initialization", n.csi.InitializeCSINode)
	lc.run(ctx, "CPU manager reconcile", func(ctx context.Context) {
		n.cpus.Run(ctx, cfg.Kubelet.CPUManagerReconcilePeriod.Duration, n.pods.ActivePods, n.kubelet.UpdateContainerCPUs)
	})
	lc.run(ctx, "runtime manager", func(ctx context.Context) { n.runtime.Start(ctx); <-ctx.Done() })
	lc.run(ctx, "image manager", n.images.Start)
	lc.run(ctx, "eviction manager", func(ctx context.Context) {
		n.eviction.Run(ctx, eviction.Deps{Stats: n.stats, ActivePods: n.pods.ActivePods, KillPod: n.kubelet.KillPodNow,
			PodCleanedUp:              n.kubelet.PodResourcesAreReclaimed,
			DeleteAllUnusedContainers: n.kubelet.DeleteAllUnusedContainers, DeleteUnusedImages: n.images.DeleteUnusedImages})
	})
	if n.conn != nil {
		lc.run(ctx, "API objects", n.conn.objects.Run)
		lc.run(ctx, "node status", n.nodeStatus.Run)
		lc.run(ctx, "pod status sync", n.statusSync.Run)
	}
	lc.run(ctx, "pod sources", n.sources.Run)
	shutdownCtx, stopShutdown := context.WithCancel(ctx)
	if err := n.shutdown.Start(shutdownCtx); err != nil {
		logger.Warn("Graceful node shutdown is off: the node shutdown manager did not start", zap.Error(err))
	}
	// Its watch ends with its context; shutdown waits for it (and the
	// inhibit lock's release).
	lc.onStop("node shutdown manager", func() { stopShutdown(); n.shutdown.Wait() })
	logger.Info("kubelet running", zap.String("pod-manifest-path", cfg.Kubelet.StaticPodPath), zap.String("healthz", healthzAddr(cfg)), zap.String("local-socket", localSocketPath(cfg)))
	notifyReady(logger)
	err := n.kubelet.Run(ctx)
	lc.shutdown()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	logger.Info("kubelet stopped; pods keep running")
	return err
}

// startServers starts the healthz endpoint (/healthz), the root-only local
// socket (/healthz, /pods, /metrics) and the kubelet API.
func (n *node) startServers(ctx context.Context, cfg *Config, lc *lifecycle, reg prometheus.Gatherer, logger *zap.Logger) error {
	var healthz, local *kubeletserver.Server
	err := lc.start("healthz endpoint", func() error {
		var err error
		healthz, err = startHealthzServer(ctx, cfg, n.kubelet, logger)
		return err
	}, func() {
		if healthz != nil {
			_ = healthz.Close()
		}
	})
	if err != nil {
		return err
	}
	err = lc.start("local socket", func() error {
		var err error
		local, err = startLocalSocket(ctx, cfg, n.kubelet, n.kubelet, reg, logger)
		return err
	}, func() {
		if local != nil {
			_ = local.Close()
		}
	})
	if err != nil {
		return err
	}
	var stopAPI func()
	return lc.start("kubelet API", func() error {
		var err error
		stopAPI, err = startAPIServers(ctx, cfg, apiServerDeps{host: n.kubelet, health: n.kubelet, gatherer: reg, registerer: n.reg,
			stats: n.stats, probeMetrics: n.probes.Metrics(), nodeName: n.name, nodeIPs: n.ips, conn: n.conn, logger: logger})
		if err != nil {
			stopAPI()
		}
		return err
	}, func() { stopAPI() })
}
