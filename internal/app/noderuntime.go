package app

import (
	"fmt"
	"net"
	"path/filepath"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/ptr"

	"k8s.io/client-go/tools/record"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/features"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/cpumanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/memorymanager"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/dns"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podcerts"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podsource"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/runtimeclass"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/runtimehelper"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

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
	reserved nodeReservations, rec record.EventRecorder, logger *zap.Logger) (*kuberuntime.Manager, error) {
	machine := n.resources.Machine()
	logSize, err := resource.ParseQuantity(cfg.Kubelet.ContainerLogMaxSize)
	if err != nil {
		return nil, fmt.Errorf("containerLogMaxSize: %w", err)
	}
	keyring, err := newNodeKeyring(cfg, logger)
	if err != nil {
		return nil, err
	}
	keyring.useServiceAccounts(n.conn, func() tokenIssuer {
		if n.volumes == nil { // built after the runtime manager; pulls come later
			return nil
		}
		return n.volumes
	})
	var classes kuberuntime.RuntimeClasses
	if n.runtimeClasses != nil {
		classes = n.runtimeClasses
	}
	var pulls kuberuntime.PullRecorder
	if n.pullRecords != nil {
		pulls = n.pullRecords
	}
	var defaultSysctls map[string]string
	if cfg.enabled(features.DefaultPodSysctls) {
		defaultSysctls = cfg.Kubelet.DefaultPodSysctls
	}
	qos := memoryQoS(cfg, machine.MemoryCapacity, reserved)
	return kuberuntime.New(kuberuntime.Options{
		Tracer: n.tracer(kuberuntime.TracerName), DefaultPodSysctls: defaultSysctls,
		Runtime: clients.runtime, Images: clients.images, Helper: helper, RuntimeClasses: classes, Logger: logger.Named("kuberuntime"),
		Recorder: rec, ProbeResults: probes, PodLogsDir: cfg.Kubelet.PodLogsDir, SeccompProfileRoot: filepath.Join(cfg.RootDirectory, "seccomp"), PodInfraImage: cfg.PodInfraContainerImage,
		SerializeImagePulls: *cfg.Kubelet.SerializeImagePulls, MaxParallelImagePulls: int(ptr.Deref(cfg.Kubelet.MaxParallelImagePulls, 0)),
		MaxParallelStarts: maxParallelStarts,
		PullQPS:           float32(*cfg.Kubelet.RegistryPullQPS), PullBurst: int(cfg.Kubelet.RegistryBurst), ContainerLogMaxSize: logSize.Value(),
		ContainerLogMaxFiles: int(*cfg.Kubelet.ContainerLogMaxFiles), ContainerLogMaxWorkers: int(*cfg.Kubelet.ContainerLogMaxWorkers),
		ContainerLogMonitorInterval: cfg.Kubelet.ContainerLogMonitorInterval.Duration, SeccompDefault: *cfg.Kubelet.SeccompDefault,
		NodeKeyring: keyring, PullRecords: pulls, CPUCFSQuota: *cfg.Kubelet.CPUCFSQuota,
		CPUCFSQuotaPeriod: cfg.Kubelet.CPUCFSQuotaPeriod.Duration, MachineMemoryBytes: machine.MemoryCapacity,
		RuntimeName: clients.runtimeName, Lifecycle: containerLifecycles{n.cpus, n.memory}, StateDir: cfg.RootDirectory, PodCgroups: n.cgroups, Registerer: n.reg,
		Startup: n.startup, RestartRules: cfg.restartRules(), MemoryQoS: qos,
		OOMGroupKill: oomGroupKill(cfg, qos.CgroupV2), Swap: kuberuntime.Swap{ControllerAvailable: cgroups.SwapAccounting(cgroups.DefaultRoot),
			Limited: cfg.Kubelet.MemorySwap.SwapBehavior == swapBehaviorLimited, Capacity: machine.SwapCapacity},
	})
}

// swapBehaviorLimited is memorySwap.swapBehavior's LimitedSwap.
const swapBehaviorLimited = "LimitedSwap"

// containerLifecycles are the managers that adjust a container before it is
// created and learn that it started, called in order (upstream's internal
// container lifecycle: the CPU manager's cpuset, then the memory manager's
// NUMA nodes).
type containerLifecycles []kuberuntime.ContainerLifecycle

func (l containerLifecycles) PreCreateContainer(pod *v1.Pod, c *v1.Container, cfg *runtimeapi.ContainerConfig) {
	for _, lc := range l {
		lc.PreCreateContainer(pod, c, cfg)
	}
}

func (l containerLifecycles) PreStartContainer(pod *v1.Pod, c *v1.Container, id string) {
	for _, lc := range l {
		lc.PreStartContainer(pod, c, id)
	}
}

// memoryQoS is the containers' MemoryQoS: on a cgroup v2 host (upstream's
// test: /sys/fs/cgroup is cgroup2), with the gate, memoryThrottlingFactor and
// the node's memory less systemReserved and kubeReserved.
func memoryQoS(cfg *Config, capacity int64, reserved nodeReservations) kuberuntime.MemoryQoS {
	v2, _ := cgroups.IsUnified(cgroups.DefaultRoot)
	alloc := reserved.allocatable(v1.ResourceList{v1.ResourceMemory: *resource.NewQuantity(capacity, resource.BinarySI)})
	return kuberuntime.MemoryQoS{CgroupV2: v2, Enabled: cfg.enabled(features.MemoryQoS),
		ThrottlingFactor: ptr.Deref(cfg.Kubelet.MemoryThrottlingFactor, 0.9), AllocatableMemory: alloc.Memory().Value()}
}

// oomGroupKill is upstream's group OOM kill of a container's processes: on a
// cgroup v2 host (v2) unless singleProcessOOMKill (on cgroup v1 the kernel
// kills one process, and singleProcessOOMKill false is refused at start).
func oomGroupKill(cfg *Config, v2 bool) bool {
	return v2 && !ptr.Deref(cfg.Kubelet.SingleProcessOOMKill, false)
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
		opts.Client, opts.NodeSynced, opts.Watched = n.conn.client, n.known.Registered, n.startup
	}
	return podsource.New(opts)
}

// newKubelet builds the coordinator over the parts built before it, with
// its PLEG.
func newKubelet(cfg *Config, n *node, helper *runtimehelper.RuntimeHelper, st *status.Manager, recorder record.EventRecorder, logger *zap.Logger) (*kubelet.Kubelet, error) {
	relist, err := newPLEG(cfg, n, logger)
	if err != nil {
		return nil, err
	}
	parts := kubelet.Parts{
		Pods: n.pods, Runtime: n.runtime, Streaming: n.runtime, Helper: helper, State: n.state, Sources: n.sources,
		PLEG:  relist,
		Cache: n.cache, Prober: n.probes, Volumes: n.volumes, Status: st, Resources: n.resources, Cgroups: n.cgroups, CPUs: n.cpus, Memory: n.memory, Devices: n.devices,
		Topology: n.topology, Features: n.features,
	}
	if parts.Sysctls, err = newSysctlAllowlist(cfg, logger); err != nil {
		return nil, err
	}
	if n.conn != nil {
		parts.Node, parts.Mirrors, parts.Secrets = n.known, status.NewMirrorClient(n.conn.client, n.name), n.conn.objects
		parts.Objects = n.conn.objects
	}
	if parts.Allocated, err = kubecontainer.OpenResourceState(cfg.RootDirectory, kubecontainer.AllocatedPodsStateFile); err != nil {
		return nil, err
	}
	return kubelet.New(kubelet.Options{
		Parts: parts, Tracer: n.tracer(kubelet.TracerName),
		Config: kubelet.Config{NodeIP: n.ips[0], ResyncInterval: cfg.Kubelet.SyncFrequency.Duration, MaxPods: podsCapacity(&cfg.Kubelet, n.resources.Machine().NumCPU),
			CPUManagerStatic:    cfg.Kubelet.CPUManagerPolicy == cpumanager.PolicyStatic,
			MemoryManagerStatic: cfg.Kubelet.MemoryManagerPolicy == memorymanager.PolicyStatic,
			NoPodLevelResize:    !cfg.enabled(features.InPlacePodLevelResourcesVerticalScaling),
			CrashLoopBackOff:    crashLoopBackOff(cfg), RestartRules: cfg.restartRules(),
			GCPolicy: kubecontainer.GCPolicy{MinAge: cfg.MinimumGCAge, MaxPerPodContainer: int(cfg.MaxPerPodContainerCount),
				MaxContainers: int(cfg.MaxContainerCount)}},
		Recorder: recorder, Registerer: n.reg, Logger: logger.Named("kubelet"),
	})
}

// newPLEG builds the generic PLEG (a relist every second), or with the
// EventedPLEG gate the evented one: the runtime's container events refresh
// the pods, and the relist runs every 300s as a safety net (every second
// while the event stream is down, and at once after it broke).
func newPLEG(cfg *Config, n *node, logger *zap.Logger) (kubelet.PLEG, error) {
	opts := pleg.Options{Runtime: n.runtime, Cache: n.cache, RelistPeriod: pleg.DefaultRelistPeriod, Registerer: n.reg, Logger: logger.Named("pleg")}
	if !cfg.enabled(features.EventedPLEG) {
		return pleg.NewGeneric(opts)
	}
	return pleg.NewEvented(pleg.EventedOptions{Options: opts, Events: n.events})
}

// newPodAPIReaders builds, with an API server, what resolves a pod's
// references to cluster objects at sync: the RuntimeClass lookup (the
// runtime manager's) and, with the PodCertificateRequest gate, the pod
// certificate manager (the volume manager's).
func newPodAPIReaders(cfg *Config, n *node, logger *zap.Logger) error {
	if n.conn == nil {
		return nil
	}
	var err error
	if n.runtimeClasses, err = runtimeclass.New(runtimeclass.Options{Client: n.conn.client, Logger: logger}); err != nil {
		return err
	}
	if !cfg.enabled(features.PodCertificateRequest) {
		return nil
	}
	n.podCerts, err = podcerts.New(podcerts.Options{Client: n.conn.client, NodeName: n.name, Node: n.known.Node, Pods: n.pods,
		Recorder: n.recorder, Registerer: n.reg, Logger: logger})
	return err
}

// newVolumes builds the volume manager.
func newVolumes(cfg *Config, n *node, logger *zap.Logger) (*volumes.Manager, error) {
	opts := volumes.Options{PodsDir: podsDir(cfg), Allocatable: n.resources, Registerer: n.reg, Logger: logger.Named("volumes")}
	if n.conn != nil {
		opts.Objects, opts.Claims, opts.TrustBundles, opts.ClaimStatus = n.conn.objects, n.conn.objects, n.conn.objects, n.conn.objects
		opts.Recorder = n.recorder
	}
	if n.podCerts != nil {
		opts.PodCertificates = n.podCerts
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
