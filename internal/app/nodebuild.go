package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/dns"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodestatus"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podsource"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/prober"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/stats"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

// node is a wired kubelet: its parts, ready to run.
type node struct {
	kubelet *kubelet.Kubelet
	runtime *kuberuntime.Manager
	sources *podsource.Source
	name    string
	ips     []net.IP
	conn    *apiConn
	// stats serves /stats/summary and /metrics/resource.
	stats *stats.Provider
	// probeMetrics serves /metrics/probes.
	probeMetrics prometheus.Gatherer
	// background are the loops that run beside the kubelet: with an API server
	// the node status and Lease, the pod status sync and the object getters.
	background []func(ctx context.Context)
}

// buildNode wires the kubelet side: pod sources, status, prober, volumes, DNS, the
// runtime helper, the runtime manager, PLEG, then the kubelet; with an API
// server (conn) also the node status controller, the pod status sync and
// mirror pods. It starts nothing.
func buildNode(cfg *Config, name string, clients *criClients, conn *apiConn, logger *zap.Logger) (*node, error) {
	ips := nodeIPs(cfg)
	recorder := podRecorder(conn, logger)
	// The kubelet is built last, but the node status (readiness) and the status
	// manager (pod deletion safety) ask it: they call through kl once it exists.
	var kl *kubelet.Kubelet
	var nodeCtrl *nodestatus.Controller
	srcOpts := podsource.Options{
		NodeName: name, ManifestPath: cfg.Kubelet.StaticPodPath, FileCheckFrequency: cfg.Kubelet.FileCheckFrequency.Duration,
		ManifestURL: cfg.Kubelet.StaticPodURL, ManifestURLHeaders: cfg.Kubelet.StaticPodURLHeader,
		HTTPCheckFrequency: cfg.Kubelet.HTTPCheckFrequency.Duration, Logger: logger.Named("podsource"), Recorder: recorder,
	}
	stOpts := status.Options{Logger: logger.Named("status")}
	volOpts := volumes.Options{PodsDir: podsDir(cfg), Logger: logger.Named("volumes")}
	if conn != nil {
		srcOpts.Client = conn.client
		// Like upstream, API pods are watched once the node is registered, so
		// that admission sees the node's labels and allocatable.
		srcOpts.NodeSynced = func() bool { return nodeCtrl != nil && nodeCtrl.Registered() }
		stOpts.Client, stOpts.NodeName = conn.client, name
		stOpts.PodDeletionSafety = reclaimFunc(func(p *v1.Pod) bool { return kl != nil && kl.PodResourcesAreReclaimed(p) })
		volOpts.Objects = conn.objects
	}
	sources, err := podsource.New(srcOpts)
	if err != nil {
		return nil, err
	}
	st := status.NewManager(stOpts)
	// The prober execs through the runtime manager, which reads the prober's results:
	// the runner is bound once the manager exists.
	runner := &lateRunner{}
	probes := prober.NewManager(prober.Options{Runner: runner, Status: st, Logger: logger.Named("prober"), Recorder: recorder})
	vols, err := volumes.New(volOpts)
	if err != nil {
		return nil, err
	}
	clusterDNS, err := parseIPs(cfg.Kubelet.ClusterDNS)
	if err != nil {
		return nil, err
	}
	opts := kubelet.Options{
		NodeName: name, NodeIP: ips[0], RootDir: cfg.RootDirectory, ClusterDomain: cfg.Kubelet.ClusterDomain,
		DNS: dns.NewConfigurer(dns.Options{ClusterDNS: clusterDNS, ClusterDomain: cfg.Kubelet.ClusterDomain,
			ResolvConf: *cfg.Kubelet.ResolverConfig, NodeIPs: ips, Logger: logger.Named("dns"), Recorder: recorder}),
		Status: st, Sources: sources, Prober: probes, Volumes: vols, Recorder: recorder,
		Logger: logger.Named("kubelet"), ResyncInterval: cfg.Kubelet.SyncFrequency.Duration, MaxPods: int(cfg.Kubelet.MaxPods),
	}
	n := &node{sources: sources, name: name, ips: ips, conn: conn}
	if conn != nil {
		nodeCtrl, err = newNodeStatus(cfg, conn, clients, name, ips, func() error {
			if kl == nil {
				return errors.New("kubelet is starting")
			}
			return kl.ReadinessError()
		}, logger)
		if err != nil {
			return nil, err
		}
		opts.Node, opts.Mirrors, opts.Secrets = nodeCtrl, status.NewMirrorClient(conn.client, name), conn.objects
		opts.EnvObjects, opts.Services = conn.objects, conn.objects
		n.background = append(n.background, nodeCtrl.Run, st.Run, conn.objects.Run)
	}
	if opts.Helper, err = kubelet.NewRuntimeHelper(opts); err != nil {
		return nil, err
	}
	rt, err := newRuntimeManager(cfg, clients, opts.Helper, probes, recorder, logger)
	if err != nil {
		return nil, err
	}
	opts.Runtime = rt
	runner.bind(rt)
	opts.Cache = kubecontainer.NewCache()
	opts.PLEG = pleg.NewGeneric(pleg.Options{Runtime: rt, Cache: opts.Cache, RelistPeriod: time.Second, Logger: logger.Named("pleg")})
	if kl, err = kubelet.New(opts); err != nil {
		return nil, err
	}
	n.kubelet, n.runtime, n.probeMetrics = kl, rt, probes.Metrics()
	if n.stats, err = stats.New(stats.Options{Runtime: clients.runtime, Images: clients.images, Pods: kl, NodeName: name,
		RootDir: cfg.RootDirectory, PodLogsDir: cfg.Kubelet.PodLogsDir, Logger: logger.Named("stats")}); err != nil {
		return nil, err
	}
	return n, nil
}

// reclaimFunc adapts a function to the status manager's PodDeletionSafety.
type reclaimFunc func(*v1.Pod) bool

func (f reclaimFunc) PodResourcesAreReclaimed(p *v1.Pod) bool { return f(p) }

// newRuntimeManager builds the runtime manager over the CRI clients.
func newRuntimeManager(cfg *Config, clients *criClients, helper kuberuntime.RuntimeHelper, probes kuberuntime.ProbeResults, rec kubelet.Recorder, logger *zap.Logger) (*kuberuntime.Manager, error) {
	logSize, err := resource.ParseQuantity(cfg.Kubelet.ContainerLogMaxSize)
	if err != nil {
		return nil, fmt.Errorf("containerLogMaxSize: %w", err)
	}
	mem := memTotal()
	return kuberuntime.New(kuberuntime.Options{
		Runtime: clients.runtime, Images: clients.images, Helper: helper, Logger: logger.Named("kuberuntime"),
		Recorder: rec, ProbeResults: probes, PodLogsDir: cfg.Kubelet.PodLogsDir, PodInfraImage: cfg.PodInfraContainerImage,
		SerializeImagePulls: *cfg.Kubelet.SerializeImagePulls, ContainerLogMaxSize: logSize.Value(),
		ContainerLogMaxFiles: int(*cfg.Kubelet.ContainerLogMaxFiles), CPUCFSQuota: *cfg.Kubelet.CPUCFSQuota,
		CPUCFSQuotaPeriod: cfg.Kubelet.CPUCFSQuotaPeriod.Duration, MachineMemoryBytes: mem, RuntimeName: clients.runtimeName,
	})
}

// run starts the node's loops and serves the local endpoint until ctx ends, then
// stops them (pods keep running).
func (n *node) run(ctx context.Context, cfg *Config, reg prometheus.Gatherer, logger *zap.Logger) error {
	if err := os.MkdirAll(filepath.Join(cfg.RootDirectory, "pods"), 0o750); err != nil {
		return fmt.Errorf("--root-dir: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv, err := startLocalServer(ctx, cfg, n.kubelet, n.kubelet, reg, logger)
	if err != nil {
		return err
	}
	if srv != nil {
		defer func() { _ = srv.Close() }()
	}
	stopAPI, err := startAPIServers(ctx, cfg, apiServerDeps{host: n.kubelet, health: n.kubelet, gatherer: reg,
		stats: n.stats, probeMetrics: n.probeMetrics, nodeName: n.name, nodeIPs: n.ips, conn: n.conn, logger: logger})
	defer stopAPI()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { n.sources.Run(ctx) })
	for _, run := range n.background {
		wg.Go(func() { run(ctx) })
	}
	n.runtime.Start(ctx)
	logger.Info("kubelet running", zap.String("pod-manifest-path", cfg.Kubelet.StaticPodPath), zap.String("healthz", healthzAddr(cfg)))
	notifyReady(logger)
	err = n.kubelet.Run(ctx)
	cancel()
	wg.Wait()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	logger.Info("kubelet stopped; pods keep running")
	return err
}

// parseIPs parses clusterDNS.
func parseIPs(in []string) ([]net.IP, error) {
	var out []net.IP
	for i, s := range in {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("clusterDNS[%d]: %q is not an IP address", i, s)
		}
		out = append(out, ip)
	}
	return out, nil
}

// lateRunner is the prober's exec runner, bound to the runtime manager after both
// exist (each needs the other).
type lateRunner struct {
	mu sync.RWMutex
	rt prober.Runner
}

func (l *lateRunner) bind(rt prober.Runner) {
	l.mu.Lock()
	l.rt = rt
	l.mu.Unlock()
}

// RunInContainer runs cmd through the bound runtime manager.
func (l *lateRunner) RunInContainer(ctx context.Context, id kubecontainer.ContainerID, cmd []string, timeout time.Duration) ([]byte, error) {
	l.mu.RLock()
	rt := l.rt
	l.mu.RUnlock()
	if rt == nil {
		return nil, errors.New("runtime manager not ready")
	}
	return rt.RunInContainer(ctx, id, cmd, timeout)
}
