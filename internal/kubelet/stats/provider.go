package stats

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// defaultPodLogsDir is where pod log directories live unless Options say otherwise.
const defaultPodLogsDir = "/var/log/pods"

// nodeRateKey is the node's entry in the CPU rate cache.
const nodeRateKey = "node/"

// PodLister looks up a pod the kubelet wants to run (a desired pod) by name;
// the kubelet coordinator's GetPodByName fits. The pod is read, never changed.
type PodLister interface {
	GetPodByName(namespace, name string) (*v1.Pod, bool)
}

// Options configures a Provider.
type Options struct {
	// Runtime answers the sandbox and container lists and stats. Required.
	Runtime internalapi.RuntimeService
	// Images answers ImageFsInfo. Required.
	Images internalapi.ImageManagerService
	// Pods are the desired pods; their specs name the volumes that are measured.
	// nil: every volume directory of a pod is measured.
	Pods PodLister
	// Claims lists the pods' volumes backed by persistent volume claims,
	// reported with their claim (and served as kubelet_volume_stats_*); nil:
	// none.
	Claims ClaimVolumeLister
	// NodeName is reported as node.nodeName. Required.
	NodeName string
	// RootDir is the kubelet's root directory (--root-dir): the node fs is its
	// filesystem and pod volumes live under RootDir/pods. Required, absolute.
	RootDir string
	// PodLogsDir holds the pods' log directories; "" = /var/log/pods.
	PodLogsDir string
	// MemoryCapacity is the machine's memory (resources.Machine), the node's
	// memory limit: availableBytes = capacity - working set. 0 = MemTotal of
	// each sample.
	MemoryCapacity int64
	// PodsCgroup is the node-allocatable cgroup (kubepods, a cgroupfs
	// name), reported as the "pods" system container; "" for none.
	PodsCgroup string
	// RuntimeCgroup is --runtime-cgroups, reported as the "runtime" system
	// container; "" for none.
	RuntimeCgroup string
	// VolumeStatsAggPeriod is how long a volume's measured usage is reused
	// (volumeStatsAggPeriod): 0 = a minute, negative = volumes are not
	// measured (upstream's 0).
	VolumeStatsAggPeriod time.Duration
	// OOMKills counts the OOM kills of each cgroup (the OOM watcher), the
	// value of container_oom_events_total; nil: 0 for every cgroup.
	OOMKills OOMCounter
	// Logger; nil = no logging.
	Logger *zap.Logger
}

// OOMCounter tells how many OOM kills the kernel logged of a cgroup (a path
// from the root of the memory hierarchy, "/" for system-wide kills).
type OOMCounter interface {
	Count(cgroupName string) uint64
}

// Provider computes stats Summaries and serves them.
type Provider struct {
	runtime    internalapi.RuntimeService
	images     internalapi.ImageManagerService
	pods       PodLister
	claims     ClaimVolumeLister
	nodeName   string
	rootDir    string
	podLogsDir string
	memory     uint64 // the machine's memory; 0 = MemTotal of each sample
	oomKills   OOMCounter
	logger     *zap.Logger

	podsCgroup, runtimeCgroup string
	started                   time.Time // when the provider was made (the kubelet's start)

	host  *hostReader
	now   func() time.Time
	rates *rateCache
	du    *duCache
	lists listCache // ListPodSandbox and ListContainers answers, reused while they cover the stats
	// noPodStats is set once the runtime answered Unimplemented to
	// ListPodSandboxStats.
	noPodStats atomic.Bool

	bootOnce sync.Once
	boot     time.Time

	registry *prometheus.Registry
}

// New checks opts and wires a Provider; it does no I/O.
func New(opts Options) (*Provider, error) {
	switch {
	case opts.Runtime == nil:
		return nil, errors.New("stats: Options.Runtime is required")
	case opts.Images == nil:
		return nil, errors.New("stats: Options.Images is required")
	case opts.NodeName == "":
		return nil, errors.New("stats: Options.NodeName is required")
	case !filepath.IsAbs(opts.RootDir):
		return nil, fmt.Errorf("stats: Options.RootDir %q must be an absolute path", opts.RootDir)
	}
	logsDir := opts.PodLogsDir
	if logsDir == "" {
		logsDir = defaultPodLogsDir
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	p := &Provider{
		runtime:    opts.Runtime,
		images:     opts.Images,
		pods:       opts.Pods,
		claims:     opts.Claims,
		nodeName:   opts.NodeName,
		rootDir:    filepath.Clean(opts.RootDir),
		podLogsDir: logsDir,
		logger:     logger,
		host:       newHostReader("/proc"),
		memory:     uint64(max(opts.MemoryCapacity, 0)),
		oomKills:   opts.OOMKills,
		now:        time.Now,
		rates:      newRateCache(),
		du:         newDuCache(opts.VolumeStatsAggPeriod),
		registry:   prometheus.NewRegistry(),

		podsCgroup: opts.PodsCgroup, runtimeCgroup: opts.RuntimeCgroup, started: time.Now(),
	}
	if err := p.registry.Register(newResourceCollector(p)); err != nil {
		return nil, fmt.Errorf("stats: register resource metrics: %w", err)
	}
	return p, nil
}

// Summary returns the node's and its pods' stats. With onlyCPUAndMemory it is
// upstream's GetCPUAndMemoryStats: node and pod CPU, memory and swap only, without
// filesystem, network, volume or image stats.
func (p *Provider) Summary(ctx context.Context, onlyCPUAndMemory bool) (*statsapi.Summary, error) {
	full := !onlyCPUAndMemory
	var (
		node            statsapi.NodeStats
		rootFs          fsInfo
		view            *runtimeView
		imageFs         *statsapi.FsStats
		nodeErr, runErr error
		imgErr          error
	)
	var imageFsStats func()
	if full {
		imageFsStats = func() { imageFs, imgErr = p.ImageFsStats(ctx) }
	}
	p.together(
		func() { node, rootFs, nodeErr = p.nodeStats(ctx, full) },
		func() { view, runErr = p.listRuntime(ctx) },
		imageFsStats,
	)
	if err := errors.Join(nodeErr, runErr, imgErr); err != nil {
		return nil, err
	}
	var pods []statsapi.PodStats
	if full {
		node.Runtime = &statsapi.RuntimeStats{ImageFs: imageFs, ContainerFs: imageFs}
		fsOf := newFsInfoCache(p.now(), p.logger)
		pods = p.buildPods(view, true, fsOf.get)
		p.addStorage(ctx, pods, rootFs)
	} else {
		pods = p.buildPods(view, false, nil)
	}
	p.rates.prune(p.now())
	if pods == nil {
		pods = []statsapi.PodStats{}
	}
	return &statsapi.Summary{Node: node, Pods: pods}, nil
}

// nodeStats reads the node's figures; full adds network, fs and rlimit and returns
// the filesystem of RootDir.
func (p *Provider) nodeStats(ctx context.Context, full bool) (statsapi.NodeStats, fsInfo, error) {
	s, rate, err := p.nodeSample(ctx)
	if err != nil {
		return statsapi.NodeStats{}, fsInfo{}, fmt.Errorf("root cgroup stats: %w", err)
	}
	at := metav1.NewTime(s.at)
	ns := statsapi.NodeStats{NodeName: p.nodeName, StartTime: metav1.NewTime(p.bootTime()), SystemContainers: p.systemContainers(s.at)}
	if s.hasCPU {
		ns.CPU = &statsapi.CPUStats{Time: at, UsageNanoCores: rate, UsageCoreNanoSeconds: &s.cpuNanos}
	}
	if s.hasMemory {
		ns.Memory = &statsapi.MemoryStats{
			Time: at, UsageBytes: &s.memUsage, WorkingSetBytes: &s.workingSet, RSSBytes: &s.rss,
			PageFaults: &s.pageFaults, MajorPageFaults: &s.majorPageFaults,
		}
		limit := p.memory
		if limit == 0 {
			limit = s.memTotal
		}
		if limit > 0 {
			// The root container's limit is the machine's memory (cAdvisor).
			avail := subFloor(limit, s.workingSet)
			ns.Memory.AvailableBytes = &avail
		}
	}
	if s.hasSwap {
		ns.Swap = &statsapi.SwapStats{Time: at, SwapUsageBytes: &s.swapUsage, SwapAvailableBytes: &s.swapFree}
	}
	if !full {
		return ns, fsInfo{}, nil
	}
	if ns.Network, err = p.host.network(s.at); err != nil {
		p.logger.Debug("node network stats", zap.Error(err))
	}
	rootFs, err := statFs(p.rootDir, s.at)
	if err != nil {
		return statsapi.NodeStats{}, fsInfo{}, fmt.Errorf("root filesystem stats: %w", err)
	}
	ns.Fs = rootFs.fsStats(s.at)
	ns.Rlimit = p.host.rlimit(s.at)
	return ns, rootFs, nil
}

// nodeSample reads the root cgroup and the node's CPU rate. Without an earlier sample
// it samples twice, bootstrapRateInterval apart, so the rate is there from the start.
func (p *Provider) nodeSample(ctx context.Context) (nodeSample, *uint64, error) {
	s, err := p.host.readNodeSample(p.now())
	if err != nil || !s.hasCPU {
		return s, nil, err
	}
	rate, first := p.rates.update(nodeRateKey, s.cpuNanos, s.at.UnixNano(), minRateInterval)
	if !first {
		return s, rate, nil
	}
	t := time.NewTimer(bootstrapRateInterval)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return s, nil, nil
	}
	s2, err := p.host.readNodeSample(p.now())
	if err != nil || !s2.hasCPU {
		return s, nil, nil
	}
	rate, _ = p.rates.update(nodeRateKey, s2.cpuNanos, s2.at.UnixNano(), bootstrapRateInterval)
	return s2, rate, nil
}

// bootTime is when the node booted, read once (upstream's node startTime).
func (p *Provider) bootTime() time.Time {
	p.bootOnce.Do(func() {
		t, err := BootTime(p.now())
		if err != nil {
			p.logger.Info("cannot read the boot time; node startTime will be zero", zap.Error(err))
		}
		p.boot = t
	})
	return p.boot
}

// ImageFsStats is the runtime's first image filesystem (ImageFs).
func (p *Provider) ImageFsStats(ctx context.Context) (*statsapi.FsStats, error) {
	return (&ImageFs{Images: p.images, Logger: p.logger}).ImageFsStats(ctx)
}

// ImageFs reads the runtime's image filesystem stats; the image manager uses
// it without a whole Provider.
type ImageFs struct {
	Images internalapi.ImageManagerService
	Logger *zap.Logger // nil: no logging
}

// ImageFsStats is the runtime's first image filesystem (as upstream), its
// capacity from statfs of the filesystem's mountpoint.
func (f *ImageFs) ImageFsStats(ctx context.Context) (*statsapi.FsStats, error) {
	resp, err := f.Images.ImageFsInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("image filesystem info: %w", err)
	}
	if len(resp.GetImageFilesystems()) == 0 {
		return nil, errors.New("image filesystem information is unavailable")
	}
	fs := resp.GetImageFilesystems()[0]
	out := &statsapi.FsStats{
		Time:       metav1.NewTime(time.Unix(0, fs.GetTimestamp())),
		UsedBytes:  valueOf(fs.GetUsedBytes()),
		InodesUsed: valueOf(fs.GetInodesUsed()),
	}
	if mp := fs.GetFsId().GetMountpoint(); mp != "" {
		fi, err := statFs(mp, time.Now())
		if err != nil {
			if f.Logger != nil {
				f.Logger.Debug("image filesystem capacity", zap.String("mountpoint", mp), zap.Error(err))
			}
			return out, nil
		}
		base := fi.baseFsStats()
		out.AvailableBytes, out.CapacityBytes, out.Inodes, out.InodesFree = base.AvailableBytes, base.CapacityBytes, base.Inodes, base.InodesFree
	}
	return out, nil
}

// fsInfoCache remembers statfs results of writable layer mountpoints for one Summary.
type fsInfoCache struct {
	now    time.Time
	logger *zap.Logger
	mu     sync.Mutex
	m      map[string]*fsInfo
}

func newFsInfoCache(now time.Time, logger *zap.Logger) *fsInfoCache {
	return &fsInfoCache{now: now, logger: logger, m: map[string]*fsInfo{}}
}

func (c *fsInfoCache) get(mountpoint string) *fsInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fi, ok := c.m[mountpoint]; ok {
		return fi
	}
	var out *fsInfo
	if fi, err := statFs(mountpoint, c.now); err == nil {
		out = &fi
	} else {
		c.logger.Debug("writable layer filesystem", zap.String("mountpoint", mountpoint), zap.Error(err))
	}
	c.m[mountpoint] = out
	return out
}

// together runs fns (nil ones skipped) side by side, each under the crash
// handler, and returns when all have.
func (p *Provider) together(fns ...func()) {
	var wg sync.WaitGroup
	for _, fn := range fns {
		if fn != nil {
			wg.Go(func() {
				defer logging.HandleCrash(p.logger, "stats")
				fn()
			})
		}
	}
	wg.Wait()
}
