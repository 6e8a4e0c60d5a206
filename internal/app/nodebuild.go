package app

import (
	"context"
	"net"

	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"k8s.io/client-go/tools/record"

	"github.com/kubelet-dockershim/kubelet/internal/features"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/cpumanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/memorymanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/devicemanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/eviction"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/images"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodefeatures"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodeshutdown"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodestatus"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/oomwatch"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pluginwatcher"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podcerts"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podmanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podresources"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podsource"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podstartup"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/prober"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/runtimeclass"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/runtimestate"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/stats"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/utilchains"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes/csi"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime/pullmanager"
)

// node is a wired kubelet: every manager, built in dependency order, ready to
// start (node.start).
type node struct {
	pods      *podmanager.Manager  // built first: every manager counting pods reads it
	known     *nodestatus.Known    // the Node object as last read or written; status sync requests
	cache     *kubecontainer.Cache // the pod status cache: the PLEG writes it, the pod workers read it
	name      string
	ips       []net.IP
	podCIDR   *podCIDR
	shutdown  *nodeshutdown.Manager
	conn      *apiConn // nil: standalone
	resources *resources.Node
	cgroups   *cm.Manager
	cpus      *cpumanager.Manager
	memory    *memorymanager.Manager
	runtime   *kuberuntime.Manager
	state     *runtimestate.State
	sources   *podsource.Source
	probes    *prober.Manager
	kubelet   *kubelet.Kubelet
	stats     *stats.Provider
	eviction  *eviction.Manager
	images    *images.Manager
	// pullRecords are KubeletEnsureSecretPulledImages' records; nil with
	// the gate off.
	pullRecords *pullmanager.Manager
	reg         prometheus.Registerer // /metrics
	tracing     trace.TracerProvider  // the tracing configuration's; nil: none
	startup     *podstartup.Tracker   // the pod start SLI
	events      pleg.EventSource      // the CRI runtime's container events
	recorder    record.EventRecorder  // events about pods and the node
	nodeRef     *v1.ObjectReference   // the node, as the object of events
	volumes     *volumes.Manager
	podCerts    *podcerts.Manager // with an API server and the PodCertificateRequest gate; else nil
	// runtimeClasses resolves runtimeClassName to handlers; nil standalone.
	runtimeClasses *runtimeclass.Manager
	devices        *devicemanager.Manager
	topology       *topologymanager.Manager
	numaNodes      []int // the machine's NUMA nodes (sysfs), read once
	// podResources serves the PodResources API.
	podResources *podresources.Server
	// features are the node features it declares.
	features *nodefeatures.Declared
	csi      *csi.Registry          // registered CSI drivers
	plugins  *pluginwatcher.Watcher // plugins_registry
	// utilChains keeps upstream's iptables util chains; nil with
	// makeIPTablesUtilChains false.
	utilChains *utilchains.Manager
	// oomWatch reports system-wide OOM kills and counts every kill.
	oomWatch *oomwatch.Watcher
	// With an API server (nil standalone):
	nodeStatus *nodestatus.Controller
	statusSync *status.Syncer
}

// buildNode builds the kubelet side in dependency order, each part from the
// config and the parts built before it; nothing refers to a part built after
// it. The pod manager first (every manager that counts pods reads it), the
// event recorder and what the node knows of its Node object; the node's
// resources and the pod sources; the container, CPU, device and image
// managers; the runtime helper, the runtime manager and the runtime state;
// the status store, the prober, volumes, PLEG and the kubelet; the API status
// sync and stats; then the managers that act on pods through the kubelet
// (eviction, graceful node shutdown), which join its admission; last, with an
// API server, the node status, which reports their conditions. It starts
// nothing.
func buildNode(cfg *Config, name string, clients *criClients, conn *apiConn, reg prometheus.Registerer, tp trace.TracerProvider, logger *zap.Logger) (*node, error) {
	n := &node{tracing: tp, pods: podmanager.New(), known: nodestatus.NewKnown(), cache: kubecontainer.NewCache(), name: name, ips: nodeIPs(cfg, name), conn: conn, reg: reg,
		events: podIdentityEvents{clients.runtime}, recorder: eventRecorder{conn: conn, logger: logger}, nodeRef: nodeReference(name)}
	if conn != nil {
		n.known.SetFetch(func(ctx context.Context) (*v1.Node, error) {
			return conn.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		})
		// The Cache strategy's time-to-live is the Node's annotation.
		conn.objects.SetNodeAnnotations(func() (map[string]string, bool) {
			node, ok := n.known.Node()
			if !ok {
				return nil, false
			}
			return node.Annotations, true
		})
	}
	reserved, err := parseReservations(&cfg.Kubelet)
	if err != nil {
		return nil, err
	}
	if n.features, err = nodefeatures.Discover(cfg.gateEnabled, cfg.ReportedVersion); err != nil {
		return nil, err
	}
	if n.resources, err = newResources(cfg, reserved, logger); err != nil {
		return nil, err
	}
	if k := cfg.Kubelet.MakeIPTablesUtilChains; k == nil || *k {
		n.utilChains = utilchains.New(utilchains.Options{Logger: logger.Named("iptables")})
	}
	n.oomWatch = oomwatch.New(oomwatch.Options{Recorder: n.recorder, NodeRef: n.nodeRef, Logger: logger.Named("oomwatcher"),
		TolerateUnreadable: runningInUserNS(realHostFiles.UIDMap) && cfg.enabled(features.KubeletInUserNamespace)})
	if n.startup, err = podstartup.New(podstartup.Options{Registerer: reg, Logger: logger.Named("podstartup")}); err != nil {
		return nil, err
	}
	if n.sources, err = newPodSources(cfg, n, n.recorder, logger); err != nil {
		return nil, err
	}
	if err := n.buildResourceManagers(cfg, clients, reserved, logger); err != nil {
		return nil, err
	}
	results := prober.NewResults()
	helper, err := newRuntimeHelper(cfg, n, n.recorder, logger)
	if err != nil {
		return nil, err
	}
	if err := newPodAPIReaders(cfg, n, logger); err != nil {
		return nil, err
	}
	if n.runtime, err = newRuntimeManager(cfg, clients, n, helper, results, reserved, n.recorder, logger); err != nil {
		return nil, err
	}
	if n.state, err = runtimestate.New(runtimestate.Options{Runtime: n.runtime, Logger: logger.Named("runtimestate")}); err != nil {
		return nil, err
	}
	st := status.NewManager(status.Options{Logger: logger.Named("status"), RestartRules: cfg.restartRules()})
	n.probes = prober.NewManager(prober.Options{Runner: n.runtime, Results: results, Status: st, Logger: logger.Named("prober"), Recorder: n.recorder,
		RestartRules: cfg.restartRules()})
	if n.volumes, err = newVolumes(cfg, n, logger); err != nil {
		return nil, err
	}
	if n.kubelet, err = newKubelet(cfg, n, helper, st, n.recorder, logger); err != nil {
		return nil, err
	}
	if conn != nil {
		if n.statusSync, err = status.NewSyncer(st, status.SyncOptions{Client: conn.client, NodeName: name,
			PodDeletionSafety: n.kubelet, Updated: n.startup, Logger: logger.Named("status")}); err != nil {
			return nil, err
		}
	}
	if n.stats, err = newStats(cfg, clients, n, logger); err != nil {
		return nil, err
	}
	return n, n.buildNodeManagers(cfg, clients, logger)
}

// buildResourceManagers builds the container, CPU, memory, device and
// topology managers, the plugin watcher and the image manager.
func (n *node) buildResourceManagers(cfg *Config, clients *criClients, reserved nodeReservations, logger *zap.Logger) error {
	var err error
	if n.cgroups, err = newContainerManager(cfg, n, reserved, logger); err != nil {
		return err
	}
	if n.cpus, err = newCPUManager(cfg, clients, n, reserved, logger); err != nil {
		return err
	}
	n.numaNodes = numaNodes(sysfsRoot(), n.cpus)
	if n.memory, err = newMemoryManager(cfg, n, logger); err != nil {
		return err
	}
	if n.devices, n.podResources, err = newDeviceManager(cfg, n, logger); err != nil {
		return err
	}
	if n.topology, err = newTopologyManager(cfg, n, logger); err != nil {
		return err
	}
	if n.csi, n.plugins, err = newPluginWatcher(cfg, n, logger); err != nil {
		return err
	}
	if n.pullRecords, err = newPullRecords(cfg, clients, n.reg, logger); err != nil {
		return err
	}
	n.images, err = newImageManager(cfg, clients, n, n.reg, logger)
	return err
}

// buildNodeManagers builds the managers that act on pods through the kubelet
// (eviction, graceful node shutdown), puts them into its admission (node
// pressure first, shutdown last), then, with an API server, the node status.
func (n *node) buildNodeManagers(cfg *Config, clients *criClients, logger *zap.Logger) error {
	var err error
	if n.eviction, err = newEvictionManager(cfg, n, n.reg, logger); err != nil {
		return err
	}
	if n.shutdown, err = newShutdownManager(cfg, n, n.reg, logger); err != nil {
		return err
	}
	n.kubelet.SetNodeAdmitters(kubelet.NodeAdmitters{Pressure: n.eviction, Shutdown: n.shutdown})
	n.podCIDR = &podCIDR{rt: clients.runtime, logger: logger}
	if n.conn != nil {
		n.nodeStatus, err = newNodeStatus(cfg, n.conn, clients, n, logger)
	}
	return err
}

// newStats builds the stats provider (the summary API, the eviction
// manager's samples) over the CRI clients, the kubelet's pods and the volume
// manager's claim volumes.
func newStats(cfg *Config, clients *criClients, n *node, logger *zap.Logger) (*stats.Provider, error) {
	p, err := stats.New(stats.Options{Runtime: clients.runtime, Images: clients.images, Pods: n.kubelet, Claims: claimVolumes{m: n.volumes, csi: n.csi}, NodeName: n.name,
		RootDir: cfg.RootDirectory, PodLogsDir: cfg.Kubelet.PodLogsDir, MemoryCapacity: n.resources.Machine().MemoryCapacity,
		PodsCgroup: n.cgroups.NodeAllocatableCgroup(), RuntimeCgroup: cfg.RuntimeCgroups,
		VolumeStatsAggPeriod: volumeStatsAggPeriod(cfg.Kubelet.VolumeStatsAggPeriod.Duration), OOMKills: n.oomWatch, Logger: logger.Named("stats")})
	if err == nil && n.reg != nil {
		err = n.reg.Register(p.VolumeStatsCollector())
	}
	return p, err
}

// claimVolumes gives the stats provider the volume manager's claim volumes,
// CSI ones measured by their driver (NodeGetVolumeStats).
type claimVolumes struct {
	m   *volumes.Manager
	csi *csi.Registry
}

func (c claimVolumes) ClaimVolumes() map[string][]stats.ClaimVolume {
	all := c.m.ClaimVolumes()
	out := make(map[string][]stats.ClaimVolume, len(all))
	for uid, vols := range all {
		for _, v := range vols {
			cv := stats.ClaimVolume{Name: v.Name, Namespace: v.Claim.Namespace, Claim: v.Claim.Name, Path: v.Path}
			if v.CSIDriver != "" {
				cv.Measure = c.csiStats(v.CSIDriver, v.CSIHandle, v.Path)
			}
			out[string(uid)] = append(out[string(uid)], cv)
		}
	}
	return out
}

// csiStats measures a CSI volume through its driver.
func (c claimVolumes) csiStats(driver, handle, path string) func(context.Context) (*statsapi.FsStats, error) {
	return func(ctx context.Context) (*statsapi.FsStats, error) {
		u, err := c.csi.VolumeStats(ctx, driver, handle, path)
		if err != nil {
			return nil, err
		}
		fs := &statsapi.FsStats{Time: metav1.Now(), CapacityBytes: &u.CapacityBytes, AvailableBytes: &u.AvailableBytes, UsedBytes: &u.UsedBytes}
		if u.HasInodes {
			fs.Inodes, fs.InodesFree, fs.InodesUsed = &u.Inodes, &u.InodesFree, &u.InodesUsed
		}
		return fs, nil
	}
}
