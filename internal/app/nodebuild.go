package app

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/flowcontrol"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	"k8s.io/client-go/tools/record"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/kubelet-dockershim/kubelet/internal/app/kubeletconfig"
	"github.com/kubelet-dockershim/kubelet/internal/features"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/cpumanager"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/devicemanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/dns"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/eviction"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/images"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodefeatures"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodeshutdown"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodestatus"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pluginwatcher"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podmanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podresources"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podsource"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podstartup"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/prober"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/runtimehelper"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/runtimestate"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/stats"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/sysctl"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes/csi"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

// node is a wired kubelet: every manager, built in dependency order, ready to
// start (node.start).
type node struct {
	pods      *podmanager.Manager // built first: every manager counting pods reads it
	name      string
	ips       []net.IP
	podCIDR   *podCIDR
	shutdown  *nodeshutdown.Manager
	conn      *apiConn // nil: standalone
	resources *resources.Node
	cgroups   *cm.Manager
	cpus      *cpumanager.Manager
	runtime   *kuberuntime.Manager
	state     *runtimestate.State
	sources   *podsource.Source
	probes    *prober.Manager
	kubelet   *kubelet.Kubelet
	stats     *stats.Provider
	eviction  *eviction.Manager
	images    *images.Manager
	reg       prometheus.Registerer // /metrics
	startup   *podstartup.Tracker   // the pod start SLI
	events    pleg.EventSource      // the CRI runtime's container events
	recorder  record.EventRecorder  // events about pods and the node
	nodeRef   *v1.ObjectReference   // the node, as the object of events
	volumes   *volumes.Manager
	devices   *devicemanager.Manager
	// podResources serves the PodResources API.
	podResources *podresources.Server
	// features are the node features it declares.
	features *nodefeatures.Declared
	csi      *csi.Registry          // registered CSI drivers
	plugins  *pluginwatcher.Watcher // plugins_registry
	// With an API server (nil standalone):
	nodeStatus *nodestatus.Controller
	statusSync *status.Syncer
}

// buildNode builds the kubelet side in dependency order, each manager from
// the config and the parts it consumes: the pod manager first (the managers
// that count pods get its ActivePods), the event recorder; the node's
// resources, the container, CPU and device managers, the eviction and image
// managers; the runtime helper, the probe results and the runtime manager;
// the runtime state; the node shutdown manager; with an API server the node
// status; the pod sources, the status store, the prober, volumes, PLEG; the
// kubelet; then what needs the kubelet (the API status sync, stats). It
// starts nothing. One binding is late: the node shutdown manager kills pods
// through the kubelet (the kubelet admits pods through it).
func buildNode(cfg *Config, name string, clients *criClients, conn *apiConn, reg prometheus.Registerer, logger *zap.Logger) (*node, error) {
	n := &node{pods: podmanager.New(), name: name, ips: nodeIPs(cfg), conn: conn, reg: reg, events: podIdentityEvents{clients.runtime},
		recorder: eventRecorder{conn: conn, logger: logger}, nodeRef: nodeReference(name)}
	recorder := n.recorder
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
	if n.cgroups, err = newContainerManager(cfg, n, reserved, logger); err != nil {
		return nil, err
	}
	if n.cpus, err = newCPUManager(cfg, reserved, logger); err != nil {
		return nil, err
	}
	if n.devices, n.podResources, err = newDeviceManager(cfg, n, logger); err != nil {
		return nil, err
	}
	if n.csi, n.plugins, err = newPluginWatcher(cfg, n, logger); err != nil {
		return nil, err
	}
	if n.eviction, err = newEvictionManager(cfg, n, reg, logger); err != nil {
		return nil, err
	}
	if n.images, err = newImageManager(cfg, clients, n, reg, logger); err != nil {
		return nil, err
	}
	if n.startup, err = podstartup.New(podstartup.Options{Registerer: reg, Logger: logger.Named("podstartup")}); err != nil {
		return nil, err
	}
	results := prober.NewResults()
	helper, err := newRuntimeHelper(cfg, n, recorder, logger)
	if err != nil {
		return nil, err
	}
	if n.runtime, err = newRuntimeManager(cfg, clients, n, helper, results, recorder, logger); err != nil {
		return nil, err
	}
	if n.state, err = runtimestate.New(runtimestate.Options{Runtime: n.runtime, Logger: logger.Named("runtimestate")}); err != nil {
		return nil, err
	}
	if n.shutdown, err = newShutdownManager(cfg, n, reg, logger); err != nil {
		return nil, err
	}
	n.podCIDR = &podCIDR{rt: clients.runtime, logger: logger}
	if conn != nil {
		if n.nodeStatus, err = newNodeStatus(cfg, conn, clients, n, logger); err != nil {
			return nil, err
		}
	}
	if n.sources, err = newPodSources(cfg, n, recorder, logger); err != nil {
		return nil, err
	}
	st := status.NewManager(status.Options{Logger: logger.Named("status"), RestartRules: cfg.restartRules()})
	n.probes = prober.NewManager(prober.Options{Runner: n.runtime, Results: results, Status: st, Logger: logger.Named("prober"), Recorder: recorder,
		RestartRules: cfg.restartRules()})
	if n.kubelet, err = newKubelet(cfg, n, helper, st, recorder, logger); err != nil {
		return nil, err
	}
	if conn != nil {
		if n.statusSync, err = status.NewSyncer(st, status.SyncOptions{Client: conn.client, NodeName: name,
			PodDeletionSafety: n.kubelet, Updated: n.startup, Logger: logger.Named("status")}); err != nil {
			return nil, err
		}
	}
	n.stats, err = stats.New(stats.Options{Runtime: clients.runtime, Images: clients.images, Pods: n.kubelet, Claims: claimVolumes{m: n.volumes, csi: n.csi}, NodeName: name,
		RootDir: cfg.RootDirectory, PodLogsDir: cfg.Kubelet.PodLogsDir, MemoryCapacity: n.resources.Machine().MemoryCapacity,
		PodsCgroup: n.cgroups.NodeAllocatableCgroup(), RuntimeCgroup: cfg.RuntimeCgroups,
		VolumeStatsAggPeriod: volumeStatsAggPeriod(cfg.Kubelet.VolumeStatsAggPeriod.Duration), Logger: logger.Named("stats")})
	if err == nil && reg != nil {
		err = reg.Register(n.stats.VolumeStatsCollector())
	}
	return n, err
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

// newEvictionManager builds the eviction manager from the thresholds (hard,
// soft with their grace periods, minimum reclaims, and the allocatable copies
// with "pods" enforced); the node starts it.
func newEvictionManager(cfg *Config, n *node, reg prometheus.Registerer, logger *zap.Logger) (*eviction.Manager, error) {
	k := &cfg.Kubelet
	thresholds, err := eviction.ParseThresholdConfig(eviction.ThresholdConfig{Hard: k.EvictionHard, Soft: k.EvictionSoft,
		SoftGracePeriod: k.EvictionSoftGracePeriod, MinimumReclaim: k.EvictionMinimumReclaim, EnforceNodeAllocatable: k.EnforceNodeAllocatable})
	if err != nil {
		return nil, fmt.Errorf("eviction thresholds: %w", err)
	}
	var hugePages int64
	for name, q := range n.resources.Capacity() {
		if resources.IsHugePages(name) && cfg.enabled(features.HugepageAwareEviction) {
			hugePages += q.Value()
		}
	}
	return eviction.New(eviction.Options{Thresholds: thresholds, PressureTransitionPeriod: k.EvictionPressureTransitionPeriod.Duration,
		MaxPodGracePeriodSeconds: int64(k.EvictionMaxPodGracePeriod), LocalStorageCapacityIsolation: *k.LocalStorageCapacityIsolation,
		KernelMemcgNotification: k.KernelMemcgNotification, PodsCgroup: n.cgroups.NodeAllocatableCgroup(), HugePagesBytes: hugePages,
		Recorder: n.recorder, NodeRef: n.nodeRef, Registerer: reg, Logger: logger.Named("eviction")})
}

// newImageManager builds the image GC manager (imageGC thresholds and ages)
// over the CRI clients; the node starts it.
func newImageManager(cfg *Config, clients *criClients, n *node, reg prometheus.Registerer, logger *zap.Logger) (*images.Manager, error) {
	k := &cfg.Kubelet
	return images.New(images.Options{Images: clients.images, Containers: clients.runtime,
		Fs: &stats.ImageFs{Images: clients.images, Logger: logger.Named("images")},
		Policy: images.Policy{HighThresholdPercent: int(*k.ImageGCHighThresholdPercent), LowThresholdPercent: int(*k.ImageGCLowThresholdPercent),
			MinAge: k.ImageMinimumGCAge.Duration, MaxAge: k.ImageMaximumGCAge.Duration},
		Recorder: n.recorder, NodeRef: n.nodeRef, Registerer: reg, Logger: logger.Named("images")})
}

// newResources reads the machine once and computes the node's capacity and
// allocatable. What could not be read is logged (the node status then reports
// the missing capacity).
func newResources(cfg *Config, reserved nodeReservations, logger *zap.Logger) (*resources.Node, error) {
	machine, err := resources.ReadMachine(cfg.RootDirectory)
	switch {
	case machine.MemoryCapacity <= 0:
		return nil, fmt.Errorf("read the machine's memory: %w", err)
	case err != nil:
		logger.Warn("Error reading machine info", zap.Error(err))
	}
	return resources.New(resources.Options{Machine: machine, MaxPods: podsCapacity(&cfg.Kubelet, machine.NumCPU),
		SystemReserved: reserved.system, KubeReserved: reserved.kube, EvictionHard: cfg.Kubelet.EvictionHard})
}

// newShutdownManager builds graceful node shutdown (shutdownGracePeriod,
// shutdownGracePeriodCriticalPods, shutdownGracePeriodByPodPriority) over
// logind; its pods and kills go through the kubelet, built later.
func newShutdownManager(cfg *Config, n *node, reg prometheus.Registerer, logger *zap.Logger) (*nodeshutdown.Manager, error) {
	k := &cfg.Kubelet
	return nodeshutdown.New(nodeshutdown.Options{
		ShutdownGracePeriod: k.ShutdownGracePeriod.Duration, ShutdownGracePeriodCriticalPods: k.ShutdownGracePeriodCriticalPods.Duration,
		ByPodPriority: k.ShutdownGracePeriodByPodPriority,
		ActivePods:    n.pods.ActivePods,
		KillPod: func(ctx context.Context, pod *v1.Pod, grace int64, statusFn func(*v1.PodStatus)) error {
			return n.kubelet.KillPodNow(ctx, pod, grace, statusFn)
		},
		StateDir: cfg.RootDirectory, Registerer: reg, Recorder: n.recorder, NodeRef: n.nodeRef, Logger: logger.Named("nodeshutdown"),
		SyncNodeStatus: func() {
			if n.nodeStatus != nil {
				n.nodeStatus.SyncNow()
			}
		},
	})
}

// newSysctlAllowlist is the sysctl admission check: upstream's safe sysctls
// this kernel namespaces plus allowedUnsafeSysctls.
func newSysctlAllowlist(cfg *Config, logger *zap.Logger) (*sysctl.Allowlist, error) {
	kernel, err := sysctl.KernelVersion()
	if err != nil {
		logger.Error("failed to get kernel version, unable to determine which sysctls are available", zap.Error(err))
	}
	allowed := append(sysctl.SafeSysctls(kernel), cfg.Kubelet.AllowedUnsafeSysctls...)
	al, err := sysctl.NewAllowlist(allowed)
	if err != nil {
		return nil, fmt.Errorf("allowedUnsafeSysctls: %w", err)
	}
	return al, nil
}

// volumeStatsAggPeriod maps volumeStatsAggPeriod onto stats.Options: 0 (or
// less) turns volume measuring off.
func volumeStatsAggPeriod(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// crashLoopBackOff is the container restart back-off, as upstream's
// newCrashLoopBackOff: 10s doubling to 300s; 1s to 60s with
// ReduceDefaultCrashLoopBackOffDecay; at most
// crashLoopBackOff.maxContainerRestartPeriod with KubeletCrashLoopBackOffMax
// (the initial delay never above it).
func crashLoopBackOff(cfg *Config) *flowcontrol.Backoff {
	initial, maxDelay := 10*time.Second, 300*time.Second
	if cfg.enabled(features.ReduceDefaultCrashLoopBackOffDecay) {
		initial, maxDelay = time.Second, 60*time.Second
	}
	if p := cfg.Kubelet.CrashLoopBackOff.MaxContainerRestartPeriod; p != nil && cfg.enabled(features.KubeletCrashLoopBackOffMax) {
		maxDelay = p.Duration
		initial = min(initial, maxDelay)
	}
	return flowcontrol.NewBackOff(initial, maxDelay)
}

// podsCapacity is the node's pods capacity: maxPods, or podsPerCore times
// the CPUs when that is smaller (upstream's MachineInfo setter).
func podsCapacity(k *kubeletv1beta1.KubeletConfiguration, cpus int) int {
	if k.PodsPerCore > 0 {
		return min(int(k.PodsPerCore)*cpus, int(k.MaxPods))
	}
	return int(k.MaxPods)
}

// newContainerManager builds the node's cgroup tree: kubepods (under
// --cgroup-root) sized as upstream sizes it, capacity (pids included) minus
// systemReserved and kubeReserved with "pods" in enforceNodeAllocatable,
// capacity without; the reservations enforced on their own cgroups; the QoS
// and pod cgroups.
func newContainerManager(cfg *Config, n *node, reserved nodeReservations, logger *zap.Logger) (*cm.Manager, error) {
	k := &cfg.Kubelet
	node := n.resources
	opts := cm.Options{
		Driver: cm.Driver(k.CgroupDriver), CgroupRoot: k.CgroupRoot, CgroupsPerQOS: *k.CgroupsPerQOS,
		PodPidsLimit: *k.PodPidsLimit, Recorder: n.recorder, NodeRef: n.nodeRef, Registerer: n.reg, Logger: logger,
		Pod: cm.PodConfig{EnforceCPULimits: *k.CPUCFSQuota, CPUPeriod: k.CPUCFSQuotaPeriod.Duration},
	}
	if !opts.CgroupsPerQOS {
		return cm.New(opts)
	}
	opts.Reserved = reservedCgroups(k, reserved)
	// internal capacity: the machine's, with the pid capacity as "pid"
	limit := node.Capacity()
	pids, err := cm.PidCapacity()
	if err != nil {
		logger.Warn("reading the node's pid capacity", zap.Error(err))
	} else {
		limit["pid"] = *resource.NewQuantity(pids, resource.DecimalSI)
	}
	if slices.Contains(k.EnforceNodeAllocatable, kubeletconfig.EnforcePods) {
		for _, rl := range []v1.ResourceList{reserved.system, reserved.kube} {
			for name, q := range rl {
				if c, ok := limit[name]; ok {
					c.Sub(q)
					if c.Sign() < 0 {
						c.Set(0)
					}
					limit[name] = c
				}
			}
		}
	}
	opts.Kubepods = cgroupConfig(limit, false)
	return cm.New(opts)
}

// newCPUManager builds the CPU manager (cpuManagerPolicy, its options,
// reservedSystemCPUs, or the cpu of kubeReserved + systemReserved) with its
// state in the root directory; the node starts it.
func newCPUManager(cfg *Config, reserved nodeReservations, logger *zap.Logger) (*cpumanager.Manager, error) {
	k := &cfg.Kubelet
	reservedCPUs, err := cpuset.Parse(k.ReservedSystemCPUs)
	if err != nil {
		return nil, fmt.Errorf("reservedSystemCPUs: %w", err)
	}
	milli := reserved.system.Cpu().MilliValue() + reserved.kube.Cpu().MilliValue()
	m, err := cpumanager.New(cpumanager.Options{Policy: k.CPUManagerPolicy, PolicyOptions: k.CPUManagerPolicyOptions,
		ReservedCPUs: reservedCPUs, ReservedMilliCPU: milli, StateDir: cfg.RootDirectory, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("new cpu manager: %w", err)
	}
	return m, nil
}

// reservedCgroups lists the reservations enforceNodeAllocatable enforces on
// their existing cgroups, in upstream's order, with upstream's values: cpu
// shares, memory and pids, or cpu shares alone for the -compressible forms.
func reservedCgroups(k *kubeletv1beta1.KubeletConfiguration, reserved nodeReservations) []cm.ReservedCgroup {
	var out []cm.ReservedCgroup
	for _, e := range []struct {
		key, what, cgroup string
		reserved          v1.ResourceList
		compressible      bool
	}{
		{kubeletconfig.EnforceSystemReserved, "System Reserved", k.SystemReservedCgroup, reserved.system, false},
		{kubeletconfig.EnforceKubeReserved, "Kube Reserved", k.KubeReservedCgroup, reserved.kube, false},
		{kubeletconfig.EnforceSystemReservedCompressible, "System Reserved Compressible", k.SystemReservedCgroup, reserved.system, true},
		{kubeletconfig.EnforceKubeReservedCompressible, "Kube Reserved Compressible", k.KubeReservedCgroup, reserved.kube, true},
	} {
		if !slices.Contains(k.EnforceNodeAllocatable, e.key) {
			continue
		}
		r := cm.ReservedCgroup{What: e.what, Cgroup: e.cgroup}
		if e.reserved != nil {
			r.Config = cgroupConfig(e.reserved, e.compressible)
		}
		out = append(out, r)
	}
	return out
}

// cgroupConfig is the cgroup configuration of a resource list (upstream's
// getCgroupConfig): cpu shares, and unless compressibleOnly memory and pids.
func cgroupConfig(rl v1.ResourceList, compressibleOnly bool) *cm.ResourceConfig {
	var rc cm.ResourceConfig
	if q, ok := rl[v1.ResourceCPU]; ok {
		shares := cm.MilliCPUToShares(q.MilliValue())
		rc.CPUShares = &shares
	}
	if compressibleOnly {
		return &rc
	}
	if q, ok := rl[v1.ResourceMemory]; ok {
		mem := q.Value()
		rc.Memory = &mem
	}
	if q, ok := rl["pid"]; ok {
		pids := q.Value()
		rc.PidsLimit = &pids
	}
	return &rc
}

// newRuntimeHelper builds the kubelet's side of the runtime manager.
func newRuntimeHelper(cfg *Config, n *node, recorder record.EventRecorder, logger *zap.Logger) (*runtimehelper.RuntimeHelper, error) {
	clusterDNS, err := parseIPs(cfg.Kubelet.ClusterDNS)
	if err != nil {
		return nil, err
	}
	opts := runtimehelper.Options{
		RootDir: cfg.RootDirectory, ClusterDomain: cfg.Kubelet.ClusterDomain, NodeIP: n.ips[0], Node: n.resources,
		DNS: dns.NewConfigurer(dns.Options{ClusterDNS: clusterDNS, ClusterDomain: cfg.Kubelet.ClusterDomain,
			ResolvConf: *cfg.Kubelet.ResolverConfig, NodeIPs: n.ips, Logger: logger.Named("dns"), Recorder: recorder}),
		Cgroups: n.cgroups, Devices: n.devices, Recorder: recorder, Logger: logger.Named("kubelet"),
	}
	if n.conn != nil {
		opts.EnvObjects, opts.Services = n.conn.objects, n.conn.objects
	}
	return runtimehelper.New(opts)
}

// maxParallelStarts bounds the sandbox creations and container starts the
// runtime manager runs at once (oldest pod first). Docker's throughput is the
// limit of a burst either way; with the bound the first pods finish first.
// 8 beat 4 with 100 pods (p99 1.14x the Docker floor against 1.42x, medians
// of 3 rounds of BenchmarkBurst, see the README).
const maxParallelStarts = 8

// The runtime manager is what the kubelet drives and serves the API with
// (kubelet declares the interfaces; only this composition root knows the type).
var (
	_ kubelet.Runtime          = (*kuberuntime.Manager)(nil)
	_ kubelet.StreamingRuntime = (*kuberuntime.Manager)(nil)
)

// newRuntimeManager builds the runtime manager over the CRI clients, with the
// node's machine facts, CPU manager (the container lifecycle), pod cgroups
// and metrics registry.
func newRuntimeManager(cfg *Config, clients *criClients, n *node, helper kubecontainer.RuntimeHelper, probes kuberuntime.ProbeResults,
	rec record.EventRecorder, logger *zap.Logger) (*kuberuntime.Manager, error) {
	machine := n.resources.Machine()
	logSize, err := resource.ParseQuantity(cfg.Kubelet.ContainerLogMaxSize)
	if err != nil {
		return nil, fmt.Errorf("containerLogMaxSize: %w", err)
	}
	keyring, err := newNodeKeyring(cfg, logger)
	if err != nil {
		return nil, err
	}
	return kuberuntime.New(kuberuntime.Options{
		Runtime: clients.runtime, Images: clients.images, Helper: helper, Logger: logger.Named("kuberuntime"),
		Recorder: rec, ProbeResults: probes, PodLogsDir: cfg.Kubelet.PodLogsDir, SeccompProfileRoot: filepath.Join(cfg.RootDirectory, "seccomp"), PodInfraImage: cfg.PodInfraContainerImage,
		SerializeImagePulls: *cfg.Kubelet.SerializeImagePulls, MaxParallelImagePulls: int(ptr.Deref(cfg.Kubelet.MaxParallelImagePulls, 0)),
		MaxParallelStarts: maxParallelStarts,
		PullQPS:           float32(*cfg.Kubelet.RegistryPullQPS), PullBurst: int(cfg.Kubelet.RegistryBurst), ContainerLogMaxSize: logSize.Value(),
		ContainerLogMaxFiles: int(*cfg.Kubelet.ContainerLogMaxFiles), ContainerLogMaxWorkers: int(*cfg.Kubelet.ContainerLogMaxWorkers),
		ContainerLogMonitorInterval: cfg.Kubelet.ContainerLogMonitorInterval.Duration, SeccompDefault: *cfg.Kubelet.SeccompDefault,
		NodeKeyring: keyring, CPUCFSQuota: *cfg.Kubelet.CPUCFSQuota,
		CPUCFSQuotaPeriod: cfg.Kubelet.CPUCFSQuotaPeriod.Duration, MachineMemoryBytes: machine.MemoryCapacity,
		RuntimeName: clients.runtimeName, Lifecycle: n.cpus, StateDir: cfg.RootDirectory, PodCgroups: n.cgroups, Registerer: n.reg,
		Startup: n.startup, RestartRules: cfg.restartRules(),
	})
}

// restartRules are the ContainerRestartRules and
// RestartAllContainersOnContainerExits gates for the parts that decide
// whether a stopped container runs again.
func (cfg *Config) restartRules() kubecontainer.RestartRules {
	return kubecontainer.RestartRules{
		PodPolicyOnly: !cfg.enabled(features.ContainerRestartRules),
		NoRestartAll:  !cfg.enabled(features.RestartAllContainersOnContainerExits),
	}
}

// newPodSources builds the static pod sources and, with an API server, the
// API source, which (as upstream) watches once the node is registered so that
// admission sees the node's labels and allocatable.
func newPodSources(cfg *Config, n *node, recorder record.EventRecorder, logger *zap.Logger) (*podsource.Source, error) {
	opts := podsource.Options{
		NodeName: n.name, ManifestPath: cfg.Kubelet.StaticPodPath, FileCheckFrequency: cfg.Kubelet.FileCheckFrequency.Duration,
		ManifestURL: cfg.Kubelet.StaticPodURL, ManifestURLHeaders: cfg.Kubelet.StaticPodURLHeader,
		HTTPCheckFrequency: cfg.Kubelet.HTTPCheckFrequency.Duration, Logger: logger.Named("podsource"), Recorder: recorder,
		RefuseRestartAllContainers: !cfg.enabled(features.RestartAllContainersOnContainerExits),
	}
	if n.conn != nil {
		opts.Client, opts.NodeSynced, opts.Watched = n.conn.client, n.nodeStatus.Registered, n.startup
	}
	return podsource.New(opts)
}

// newKubelet builds the coordinator over the parts built before it.
func newKubelet(cfg *Config, n *node, helper *runtimehelper.RuntimeHelper, st *status.Manager, recorder record.EventRecorder, logger *zap.Logger) (*kubelet.Kubelet, error) {
	vols, err := newVolumes(cfg, n, logger)
	if err != nil {
		return nil, err
	}
	n.volumes = vols
	cache := kubecontainer.NewCache()
	relist, err := newPLEG(cfg, n, cache, logger)
	if err != nil {
		return nil, err
	}
	parts := kubelet.Parts{
		Pods: n.pods, Runtime: n.runtime, Streaming: n.runtime, Helper: helper, State: n.state, Sources: n.sources,
		PLEG:  relist,
		Cache: cache, Prober: n.probes, Volumes: vols, Status: st, Resources: n.resources, Cgroups: n.cgroups, CPUs: n.cpus, Devices: n.devices,
		Pressure: n.eviction, Features: n.features,
	}
	if parts.Sysctls, err = newSysctlAllowlist(cfg, logger); err != nil {
		return nil, err
	}
	parts.Shutdown = n.shutdown
	if n.conn != nil {
		parts.Node, parts.Mirrors, parts.Secrets = n.nodeStatus, status.NewMirrorClient(n.conn.client, n.name), n.conn.objects
	}
	if parts.Allocated, err = kubecontainer.OpenResourceState(cfg.RootDirectory, kubecontainer.AllocatedPodsStateFile); err != nil {
		return nil, err
	}
	return kubelet.New(kubelet.Options{
		Parts: parts,
		Config: kubelet.Config{NodeIP: n.ips[0], ResyncInterval: cfg.Kubelet.SyncFrequency.Duration, MaxPods: podsCapacity(&cfg.Kubelet, n.resources.Machine().NumCPU),
			CPUManagerStatic: cfg.Kubelet.CPUManagerPolicy == cpumanager.PolicyStatic,
			NoPodLevelResize: !cfg.enabled(features.InPlacePodLevelResourcesVerticalScaling),
			CrashLoopBackOff: crashLoopBackOff(cfg), RestartRules: cfg.restartRules(),
			GCPolicy: kubecontainer.GCPolicy{MinAge: cfg.MinimumGCAge, MaxPerPodContainer: int(cfg.MaxPerPodContainerCount),
				MaxContainers: int(cfg.MaxContainerCount)}},
		Recorder: recorder, Registerer: n.reg, Logger: logger.Named("kubelet"),
	})
}

// newDeviceManager builds the device plugin manager on
// <root>/device-plugins and the PodResources API on <root>/pod-resources,
// both asking the kubelet (built later) for the active pods.
func newDeviceManager(cfg *Config, n *node, logger *zap.Logger) (*devicemanager.Manager, *podresources.Server, error) {
	active := n.pods.ActivePods
	dm, err := devicemanager.New(devicemanager.Options{Dir: filepath.Join(cfg.RootDirectory, "device-plugins"), Resources: n.resources,
		ActivePods: active, SourcesReady: func() bool { return n.sources.SeenAllSources() }, Registerer: n.reg, Logger: logger.Named("devicemanager")})
	if err != nil {
		return nil, nil, err
	}
	pr, err := podresources.New(podresources.Options{Dir: filepath.Join(cfg.RootDirectory, "pod-resources"), ActivePods: active,
		Devices: dm, CPUs: n.cpus, Registerer: n.reg, Logger: logger.Named("podresources")})
	return dm, pr, err
}

// newPluginWatcher builds the CSI driver registry and the plugin watcher of
// <root>/plugins_registry that feeds it.
func newPluginWatcher(cfg *Config, n *node, logger *zap.Logger) (*csi.Registry, *pluginwatcher.Watcher, error) {
	opts := csi.Options{NodeName: n.name, RootDir: cfg.RootDirectory, Logger: logger.Named("csi")}
	if n.conn != nil {
		opts.Client = n.conn.client
	}
	reg, err := csi.NewRegistry(opts)
	if err != nil {
		return nil, nil, err
	}
	w, err := pluginwatcher.New(pluginwatcher.Options{Dir: filepath.Join(cfg.RootDirectory, "plugins_registry"),
		Handlers: map[string]pluginwatcher.Handler{registerapi.CSIPlugin: reg}, Logger: logger.Named("pluginwatcher")})
	return reg, w, err
}

// newPLEG builds the generic PLEG (a relist every second), or with the
// EventedPLEG gate the evented one: the runtime's container events refresh
// the pods, and the relist runs every 300s as a safety net (every second
// while the event stream is down, and at once after it broke).
func newPLEG(cfg *Config, n *node, cache *kubecontainer.Cache, logger *zap.Logger) (kubelet.PLEG, error) {
	opts := pleg.Options{Runtime: n.runtime, Cache: cache, RelistPeriod: pleg.DefaultRelistPeriod, Registerer: n.reg, Logger: logger.Named("pleg")}
	if !cfg.enabled(features.EventedPLEG) {
		return pleg.NewGeneric(opts)
	}
	return pleg.NewEvented(pleg.EventedOptions{Options: opts, Events: n.events})
}

// newVolumes builds the volume manager.
func newVolumes(cfg *Config, n *node, logger *zap.Logger) (*volumes.Manager, error) {
	opts := volumes.Options{PodsDir: podsDir(cfg), Allocatable: n.resources, Registerer: n.reg, Logger: logger.Named("volumes")}
	if n.conn != nil {
		opts.Objects, opts.Claims = n.conn.objects, n.conn.objects
	}
	opts.CSI = n.csi
	return volumes.New(opts)
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
