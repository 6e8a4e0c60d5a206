package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/component-base/featuregate"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/cpuset"
	"k8s.io/utils/ptr"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/kubelet-dockershim/kubelet/internal/app/kubeletconfig"
	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/features"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/cpumanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/memorymanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/devicemanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/eviction"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/images"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodeshutdown"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pluginwatcher"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podresources"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/stats"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/sysctl"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes/csi"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime/pullmanager"
)

// newEvictionManager builds the eviction manager from the thresholds (hard,
// soft with their grace periods, minimum reclaims, and the allocatable copies
// with "pods" enforced), sampling the stats provider and killing pods through
// the kubelet; the node starts it.
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
		Recorder: n.recorder, NodeRef: n.nodeRef, Registerer: reg, Logger: logger.Named("eviction"),
		Deps: eviction.Deps{Stats: n.stats, ActivePods: n.pods.ActivePods, KillPod: n.kubelet.KillPodNow,
			PodCleanedUp: n.kubelet.PodResourcesAreReclaimed, DeleteAllUnusedContainers: n.kubelet.DeleteAllUnusedContainers,
			DeleteUnusedImages: n.images.DeleteUnusedImages}})
}

// newImageManager builds the image GC manager (imageGC thresholds and ages)
// over the CRI clients; the node starts it.
func newImageManager(cfg *Config, clients *criClients, n *node, reg prometheus.Registerer, logger *zap.Logger) (*images.Manager, error) {
	k := &cfg.Kubelet
	var hooks []images.PostGCHook
	if n.pullRecords != nil {
		hooks = append(hooks, func(_ context.Context, remaining []string, gcStart time.Time) {
			n.pullRecords.PruneUnknownRecords(remaining, gcStart)
		})
	}
	return images.New(images.Options{Images: clients.images, Containers: clients.runtime, PostGCHooks: hooks,
		Fs: &stats.ImageFs{Images: clients.images, Logger: logger.Named("images")},
		Policy: images.Policy{HighThresholdPercent: int(*k.ImageGCHighThresholdPercent), LowThresholdPercent: int(*k.ImageGCLowThresholdPercent),
			MinAge: k.ImageMinimumGCAge.Duration, MaxAge: k.ImageMaximumGCAge.Duration},
		Recorder: n.recorder, NodeRef: n.nodeRef, Registerer: reg, Logger: logger.Named("images"), Tracer: n.tracer(images.TracerName)})
}

// newPullRecords opens the image pull records of KubeletEnsureSecretPulledImages
// (nil with the gate off) with imagePullCredentialsVerificationPolicy and
// preloadedImagesVerificationAllowlist; the intents a previous kubelet left
// are settled against the runtime's images.
func newPullRecords(cfg *Config, clients *criClients, reg prometheus.Registerer, logger *zap.Logger) (*pullmanager.Manager, error) {
	if !cfg.enabled(features.KubeletEnsureSecretPulledImages) {
		return nil, nil
	}
	k := &cfg.Kubelet
	policy, err := pullmanager.NewPolicy(k.ImagePullCredentialsVerificationPolicy, k.PreloadedImagesVerificationAllowlist)
	if err != nil {
		return nil, err
	}
	var met *pullmanager.Metrics
	if reg != nil {
		if met, err = pullmanager.NewMetrics(reg); err != nil {
			return nil, err
		}
	}
	return pullmanager.New(context.Background(), pullmanager.Options{RootDirectory: cfg.RootDirectory, Policy: policy,
		Images: criImageLister{clients.images}, MaxPods: int(k.MaxPods), MaxParallelPulls: int(ptr.Deref(k.MaxParallelImagePulls, 0)),
		Metrics: met, Logger: logger.Named("pullrecords")})
}

// criImageLister lists the CRI runtime's images for the pull records.
type criImageLister struct {
	images interface {
		ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	}
}

func (l criImageLister) ListImages(ctx context.Context) ([]pullmanager.Image, error) {
	list, err := l.images.ListImages(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make([]pullmanager.Image, 0, len(list))
	for _, img := range list {
		out = append(out, pullmanager.Image{ID: img.GetId(), RepoTags: img.GetRepoTags(), RepoDigests: img.GetRepoDigests()})
	}
	return out, nil
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
// logind; it kills pods through the kubelet and asks the node status for an
// update at once (through what the node knows of its Node object).
func newShutdownManager(cfg *Config, n *node, reg prometheus.Registerer, logger *zap.Logger) (*nodeshutdown.Manager, error) {
	k := &cfg.Kubelet
	return nodeshutdown.New(nodeshutdown.Options{
		ShutdownGracePeriod: k.ShutdownGracePeriod.Duration, ShutdownGracePeriodCriticalPods: k.ShutdownGracePeriodCriticalPods.Duration,
		ByPodPriority: k.ShutdownGracePeriodByPodPriority,
		ActivePods:    n.pods.ActivePods, KillPod: n.kubelet.KillPodNow, SyncNodeStatus: n.known.RequestSync,
		StateDir: cfg.RootDirectory, Registerer: reg, Recorder: n.recorder, NodeRef: n.nodeRef, Logger: logger.Named("nodeshutdown"),
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
		Driver: cgroups.Kind(k.CgroupDriver), CgroupRoot: k.CgroupRoot, CgroupsPerQOS: *k.CgroupsPerQOS,
		PodPidsLimit: *k.PodPidsLimit, Recorder: n.recorder, NodeRef: n.nodeRef, Registerer: n.reg, Logger: logger,
		Pod: cm.PodConfig{EnforceCPULimits: *k.CPUCFSQuota, CPUPeriod: k.CPUCFSQuotaPeriod.Duration}, ActivePods: n.pods.ActivePods,
		KubeletCgroup: k.KubeletCgroups,
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
		limit = reserved.allocatable(limit)
	}
	opts.Kubepods = cgroupConfig(limit, false)
	if pct, ok := qosReservedMemory(k.QOSReserved); ok && !cfg.enabled(featureQOSReserved) {
		logger.Warn("qosReserved has no effect without the QOSReserved feature gate (alpha), as upstream", zap.Int64("memory-percent", pct))
	} else if ok {
		opts.QOSReservedMemory = &pct
		alloc := reserved.allocatable(v1.ResourceList{v1.ResourceMemory: node.Capacity()[v1.ResourceMemory]})
		opts.AllocatableMemory = alloc.Memory().Value()
	}
	return cm.New(opts)
}

// qosReservedMemory is qosReserved's memory percentage (checked at start).
func qosReservedMemory(m map[string]string) (int64, bool) {
	v, ok := m[string(v1.ResourceMemory)]
	if !ok {
		return 0, false
	}
	pct, err := kubeletconfig.ParsePercentage(v)
	return pct, err == nil
}

// newCPUManager builds the CPU manager (cpuManagerPolicy, its options,
// reservedSystemCPUs, or the cpu of kubeReserved + systemReserved) with its
// state in the root directory; its reconcile loop reads the pod status cache
// and sets cpusets through the CRI runtime. The node starts it.
func newCPUManager(cfg *Config, clients *criClients, n *node, reserved nodeReservations, logger *zap.Logger) (*cpumanager.Manager, error) {
	k := &cfg.Kubelet
	reservedCPUs, err := cpuset.Parse(k.ReservedSystemCPUs)
	if err != nil {
		return nil, fmt.Errorf("reservedSystemCPUs: %w", err)
	}
	milli := reserved.system.Cpu().MilliValue() + reserved.kube.Cpu().MilliValue()
	m, err := cpumanager.New(cpumanager.Options{Policy: k.CPUManagerPolicy, PolicyOptions: k.CPUManagerPolicyOptions,
		OptionGates: cpumanager.OptionGates{Alpha: cfg.enabled(featureCPUManagerAlphaOptions), Beta: cfg.enabled(featureCPUManagerBetaOptions)},
		Registerer:  n.reg, ReservedCPUs: reservedCPUs, ReservedMilliCPU: milli, StateDir: cfg.RootDirectory, Logger: logger, SysfsRoot: sysfsRoot(),
		ActivePods: n.pods.ActivePods, SourcesReady: n.sources.SeenAllSources, ReconcilePeriod: k.CPUManagerReconcilePeriod.Duration,
		Statuses: n.cache, Containers: clients.runtime})
	if err != nil {
		return nil, fmt.Errorf("new cpu manager: %w", err)
	}
	return m, nil
}

// newMemoryManager builds the memory manager (memoryManagerPolicy,
// reservedMemory checked against the node allocatable reservation) over the
// NUMA nodes' memory read from sysfs (with Static only), with its state in
// the root directory.
func newMemoryManager(cfg *Config, n *node, logger *zap.Logger) (*memorymanager.Manager, error) {
	k := &cfg.Kubelet
	var nodes []memorymanager.NUMANode
	if k.MemoryManagerPolicy == memorymanager.PolicyStatic { // None uses none
		var err error
		if nodes, err = memorymanager.ReadNUMANodes(sysfsRoot()); err != nil {
			return nil, fmt.Errorf("read the NUMA nodes' memory: %w", err)
		}
	}
	return memorymanager.New(memorymanager.Options{Policy: k.MemoryManagerPolicy, Nodes: nodes, NodeReservation: n.resources.Reservation(),
		ReservedMemory: k.ReservedMemory, StateDir: cfg.RootDirectory, ActivePods: n.pods.ActivePods, SourcesReady: n.sources.SeenAllSources,
		Registerer: n.reg, Logger: logger}) // upstream's errors, unwrapped
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
func cgroupConfig(rl v1.ResourceList, compressibleOnly bool) *cgroups.Resources {
	var rc cgroups.Resources
	if q, ok := rl[v1.ResourceCPU]; ok {
		shares := cgroups.MilliCPUToShares(q.MilliValue())
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

// newDeviceManager builds the device plugin manager on
// <root>/device-plugins and the PodResources API on <root>/pod-resources,
// both reading the pod manager's active pods.
func newDeviceManager(cfg *Config, n *node, logger *zap.Logger) (*devicemanager.Manager, *podresources.Server, error) {
	active := n.pods.ActivePods
	dm, err := devicemanager.New(devicemanager.Options{Dir: filepath.Join(cfg.RootDirectory, "device-plugins"), Resources: n.resources,
		NUMANodes:  n.cpus.Topology().CPUDetails.NUMANodes().List(),
		ActivePods: active, SourcesReady: n.sources.SeenAllSources, Registerer: n.reg, Logger: logger.Named("devicemanager")})
	if err != nil {
		return nil, nil, err
	}
	pr, err := podresources.New(podresources.Options{Dir: filepath.Join(cfg.RootDirectory, "pod-resources"), ActivePods: active,
		Devices: dm, CPUs: n.cpus, Memory: n.memory, Registerer: n.reg, Logger: logger.Named("podresources")})
	return dm, pr, err
}

// newTopologyManager builds the topology manager (topologyManagerPolicy,
// topologyManagerScope, topologyManagerPolicyOptions) over the device and
// CPU and memory managers (upstream's order), with the NUMA nodes of sysfs
// and their distances.
func newTopologyManager(cfg *Config, n *node, logger *zap.Logger) (*topologymanager.Manager, error) {
	k := &cfg.Kubelet
	nodes := n.numaNodes
	tm, err := topologymanager.New(topologymanager.Options{Policy: k.TopologyManagerPolicy, Scope: k.TopologyManagerScope,
		PolicyOptions: k.TopologyManagerPolicyOptions, NUMANodes: nodes, Distances: numaDistances(sysfsRoot(), nodes),
		Providers:  []topologymanager.HintProvider{n.devices, n.cpus, n.memory},
		Registerer: n.reg, Logger: logger.Named("topologymanager")})
	if err != nil {
		return nil, err // upstream's message, unwrapped
	}
	return tm, nil
}

// sysfsTestEnv names the environment variable that moves /sys for the CPU
// and NUMA topology: test support only, so that tests can give a kubelet
// the topology of a multi-NUMA machine (a fake tree) on this one.
const sysfsTestEnv = "KUBELET_DOCKERSHIM_TEST_SYSFS"

// sysfsRoot is /sys, or the test tree sysfsTestEnv names.
func sysfsRoot() string {
	if d := os.Getenv(sysfsTestEnv); d != "" {
		return d
	}
	return "/sys"
}

// numaNodes lists the machine's NUMA nodes as cAdvisor does: every
// devices/system/node/node<N> (memory-only nodes too); without that
// directory, those of the CPU topology (its socket IDs).
func numaNodes(root string, cpus *cpumanager.Manager) []int {
	entries, err := os.ReadDir(filepath.Join(root, "devices", "system", "node"))
	var out []int
	for _, e := range entries {
		if id, ok := strings.CutPrefix(e.Name(), "node"); ok && e.IsDir() {
			if n, err := strconv.Atoi(id); err == nil {
				out = append(out, n)
			}
		}
	}
	if err != nil || len(out) == 0 {
		return cpus.Topology().CPUDetails.NUMANodes().List()
	}
	slices.Sort(out)
	return out
}

// numaDistances reads each NUMA node's distance row
// (devices/system/node/node<N>/distance, as cAdvisor); a node whose file is
// missing or unreadable has none.
func numaDistances(root string, nodes []int) map[int][]uint64 {
	out := map[int][]uint64{}
	for _, node := range nodes {
		b, err := os.ReadFile(filepath.Join(root, "devices", "system", "node", "node"+strconv.Itoa(node), "distance"))
		if err != nil {
			continue
		}
		var row []uint64
		for _, f := range strings.Fields(string(b)) {
			d, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				row = nil
				break
			}
			row = append(row, d)
		}
		if row != nil {
			out[node] = row
		}
	}
	return out
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

// Upstream's gates read here: QOSReserved (alpha), and those of the CPU
// manager's alpha and beta policy options.
const (
	featureQOSReserved            featuregate.Feature = "QOSReserved"
	featureCPUManagerAlphaOptions featuregate.Feature = "CPUManagerPolicyAlphaOptions"
	featureCPUManagerBetaOptions  featuregate.Feature = "CPUManagerPolicyBetaOptions"
)
