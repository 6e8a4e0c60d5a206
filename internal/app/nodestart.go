package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/kubeletserver"
)

// run starts the node's components through lc in dependency order, runs the
// kubelet's sync loop until ctx ends, and leaves the ordered shutdown to lc
// (pods keep running). Every component has the one lifecycle shape (built
// with what it needs, Start(ctx) error, Wait): the runtime state (checked
// once before anything reads it), then, after the local endpoint and the
// kubelet API, the resource managers, the runtime manager's loops, image GC
// and eviction, with an API server its object getters, the node status and
// the status sync, then the pod sources; graceful node shutdown last (a
// machine without logind only loses it, with a warning).
func (n *node) run(ctx context.Context, cfg *Config, lc *lifecycle, reg prometheus.Gatherer, logger *zap.Logger) error {
	if err := os.MkdirAll(podsDir(cfg), 0o750); err != nil {
		return fmt.Errorf("--root-dir: %w", err)
	}
	// Whatever the servers start under ctx (authentication caches, serving
	// certificate rotation) ends with the node, after every component.
	ctx, cancel := context.WithCancel(ctx)
	lc.onStop("node context", cancel)
	if err := lc.startComponent(ctx, "runtime state", n.state); err != nil {
		return err
	}
	// --pod-cidr of a standalone node; the node's spec.podCIDRs follow at
	// every status update.
	if _, err := n.podCIDR.update(ctx, cfg.Kubelet.PodCIDR); err != nil {
		logger.Error("Pod CIDR update failed", zap.Error(err))
	}
	if err := n.startServers(ctx, cfg, lc, reg, logger); err != nil {
		return err
	}
	for _, c := range n.components() {
		if err := lc.startComponent(ctx, c.name, c.component); err != nil {
			return err
		}
	}
	if err := lc.startComponent(ctx, "node shutdown manager", n.shutdown); err != nil {
		logger.Warn("Graceful node shutdown is off: the node shutdown manager did not start", zap.Error(err))
	}
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

// namedComponent is a component with its name in logs and errors.
type namedComponent struct {
	name string
	component
}

// components are the components run starts after the servers, in order.
func (n *node) components() []namedComponent {
	var list []namedComponent
	if n.utilChains != nil {
		list = append(list, namedComponent{"iptables util chains", n.utilChains})
	}
	list = append(list, namedComponent{"OOM watcher", n.oomWatch})
	list = append(list, []namedComponent{
		{"container manager", n.cgroups},
		{"CPU manager", n.cpus},
		{"memory manager", n.memory},
		{"device manager", n.devices},
		{"pod resources API", n.podResources},
		{"plugin watcher", n.plugins},
		{"CSINode initialization", n.csi},
		{"runtime manager", n.runtime},
		{"image manager", n.images},
		{"eviction manager", n.eviction},
	}...)
	if n.conn != nil {
		list = append(list, namedComponent{"API objects", n.conn.objects}, namedComponent{"node status", n.nodeStatus},
			namedComponent{"pod status sync", n.statusSync})
	}
	if n.runtimeClasses != nil {
		list = append(list, namedComponent{"runtime classes", n.runtimeClasses})
	}
	if n.podCerts != nil {
		list = append(list, namedComponent{"pod certificates", n.podCerts})
	}
	return append(list, namedComponent{"pod sources", n.sources})
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
			stats: n.stats, probeMetrics: n.probes.Metrics(), nodeName: n.name, nodeIPs: n.ips, conn: n.conn, tracing: n.tracing, logger: logger})
		if err != nil {
			stopAPI()
		}
		return err
	}, func() { stopAPI() })
}
