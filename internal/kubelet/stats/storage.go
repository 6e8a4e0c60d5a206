package stats

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

const (
	// volumeStatsTTL is how long a volume's usage is reused (upstream computes volume
	// stats in the background once per VolumeStatsAggPeriod, a minute by default).
	volumeStatsTTL = time.Minute
	// duEntryIdle forgets volumes no Summary asked about for so long.
	duEntryIdle = 10 * time.Minute
	// storageParallelism bounds the pods whose storage is measured at once.
	storageParallelism = 4
)

// isEphemeralPluginDir reports whether volumes of this plugin directory (under
// <pod>/volumes) are the pod's ephemeral storage and are measured.
func isEphemeralPluginDir(name string) bool {
	switch name {
	case "kubernetes.io~empty-dir", "kubernetes.io~configmap", "kubernetes.io~secret",
		"kubernetes.io~projected", "kubernetes.io~downward-api":
		return true
	}
	return false
}

// duCache remembers du-like walks of volume directories for volumeStatsTTL. One
// walk per directory runs at a time; others wait for it, or take the previous
// result when there is one.
type duCache struct {
	ttl     time.Duration // < 0: nothing is measured
	mu      sync.Mutex
	entries map[string]*duEntry
}

type duEntry struct {
	usage     diskUsage
	fs        fsInfo
	valid     bool
	usedAt    time.Time
	computing chan struct{} // non-nil while a walk runs
}

func newDuCache(ttl time.Duration) *duCache {
	if ttl == 0 {
		ttl = volumeStatsTTL
	}
	return &duCache{ttl: ttl, entries: map[string]*duEntry{}}
}

// get returns the usage of path and its filesystem's figures.
func (c *duCache) get(ctx context.Context, path string, now time.Time) (diskUsage, fsInfo, error) {
	for {
		c.mu.Lock()
		e := c.entries[path]
		if e == nil {
			e = &duEntry{}
			c.entries[path] = e
		}
		e.usedAt = now
		if e.valid && (now.Sub(e.usage.at) < c.ttl || e.computing != nil) {
			u, f := e.usage, e.fs
			c.mu.Unlock()
			return u, f, nil
		}
		if ch := e.computing; ch != nil {
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return diskUsage{}, fsInfo{}, ctx.Err()
			}
		}
		ch := make(chan struct{})
		e.computing = ch
		c.mu.Unlock()

		u, err := walkDiskUsage(ctx, path, now)
		var f fsInfo
		if err == nil || errors.Is(err, errWalkTruncated) {
			f, err = statFs(path, now)
		}

		c.mu.Lock()
		e.computing = nil
		close(ch)
		if err != nil {
			delete(c.entries, path)
			c.mu.Unlock()
			return diskUsage{}, fsInfo{}, err
		}
		e.usage, e.fs, e.valid = u, f, true
		c.mu.Unlock()
		return u, f, nil
	}
}

// prune forgets paths not asked about for duEntryIdle.
func (c *duCache) prune(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, e := range c.entries {
		if e.computing == nil && now.Sub(e.usedAt) > duEntryIdle {
			delete(c.entries, p)
		}
	}
}

// addStorage fills the storage part of each pod (volumes, container and pod logs,
// etc-hosts, ephemeral-storage), a few pods at a time. rootFs is the filesystem of
// RootDir, where logs and emptyDirs live.
func (p *Provider) addStorage(ctx context.Context, pods []statsapi.PodStats, rootFs fsInfo) {
	sem := make(chan struct{}, storageParallelism)
	claims := p.claimVolumesByPod()
	var wg sync.WaitGroup
	for i := range pods {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			defer logging.HandleCrash(p.logger, "stats")
			p.podStorage(ctx, &pods[i], p.desiredPod(pods[i].PodRef), rootFs, claims[pods[i].PodRef.UID])
		})
	}
	wg.Wait()
	p.du.prune(p.now())
}

// desiredPod returns the desired pod ref names, if it has ref's UID.
func (p *Provider) desiredPod(ref statsapi.PodReference) *v1.Pod {
	if p.pods == nil {
		return nil
	}
	if pod, ok := p.pods.GetPodByName(ref.Namespace, ref.Name); ok && string(pod.UID) == ref.UID {
		return pod
	}
	return nil
}

// podStorage is upstream's makePodStorageStats for one pod: its volume stats
// are its ephemeral volumes', which count in its ephemeral storage, then its
// claim volumes'.
func (p *Provider) podStorage(ctx context.Context, ps *statsapi.PodStats, desired *v1.Pod, rootFs fsInfo, claims []ClaimVolume) {
	ref := ps.PodRef
	podLogs := filepath.Join(p.podLogsDir, strings.Join([]string{ref.Namespace, ref.Name, ref.UID}, "_"))
	for i := range ps.Containers {
		ps.Containers[i].Logs = p.filesUsage(filepath.Join(podLogs, ps.Containers[i].Name), rootFs)
	}
	ephemeralVols := p.volumeStats(ctx, ref.UID, desired)
	etcHosts := p.etcHostsUsage(filepath.Join(p.rootDir, "pods", ref.UID, "etc-hosts"), rootFs)
	ps.EphemeralStorage = ephemeralStorage(ps.Containers, ephemeralVols, rootFs, p.filesUsage(podLogs, rootFs), etcHosts)
	ps.VolumeStats = append(ephemeralVols, p.claimVolumeStats(ctx, claims)...)
}

// volumeStats measures the pod's ephemeral volume directories. For a desired pod only
// the volumes of its spec count; a pod the kubelet no longer wants (being torn down)
// reports every directory found.
func (p *Provider) volumeStats(ctx context.Context, uid string, desired *v1.Pod) []statsapi.VolumeStats {
	var inSpec map[string]bool
	if desired != nil {
		inSpec = map[string]bool{}
		for _, v := range desired.Spec.Volumes {
			inSpec[v.Name] = true
		}
	}
	if p.du.ttl < 0 {
		return nil // volumeStatsAggPeriod 0: volumes are not measured
	}
	volumesDir := filepath.Join(p.rootDir, "pods", uid, "volumes")
	plugins, err := os.ReadDir(volumesDir)
	if err != nil {
		return nil
	}
	var out []statsapi.VolumeStats
	for _, plugin := range plugins {
		if !plugin.IsDir() || !isEphemeralPluginDir(plugin.Name()) {
			continue
		}
		vols, err := os.ReadDir(filepath.Join(volumesDir, plugin.Name()))
		if err != nil {
			continue
		}
		for _, vol := range vols {
			if !vol.IsDir() || (inSpec != nil && !inSpec[vol.Name()]) {
				continue
			}
			path := filepath.Join(volumesDir, plugin.Name(), vol.Name())
			u, f, err := p.du.get(ctx, path, p.now())
			if err != nil {
				p.logger.Debug("volume usage", zap.String("path", path), zap.Error(err))
				continue
			}
			fs := f.baseFsStats()
			fs.Time = metav1.NewTime(u.at)
			used, inodes := u.bytes, u.inodes
			fs.UsedBytes, fs.InodesUsed = &used, &inodes
			out = append(out, statsapi.VolumeStats{Name: vol.Name(), FsStats: *fs})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// filesUsage is the usage of the files directly in dir (a pod's or a container's log
// directory) on the root filesystem, nil when dir cannot be read.
func (p *Provider) filesUsage(dir string, rootFs fsInfo) *statsapi.FsStats {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := rootFs.baseFsStats()
	var used, inodes uint64
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		u, err := fileUsage(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		used += u.bytes
		inodes += u.inodes
	}
	out.UsedBytes, out.InodesUsed = &used, &inodes
	out.Time = metav1.NewTime(p.now())
	return out
}

// etcHostsUsage is the usage of the pod's etc-hosts file, nil when it has none.
func (p *Provider) etcHostsUsage(path string, rootFs fsInfo) *statsapi.FsStats {
	u, err := fileUsage(path)
	if err != nil {
		return nil
	}
	out := rootFs.baseFsStats()
	out.UsedBytes, out.InodesUsed = &u.bytes, &u.inodes
	out.Time = metav1.NewTime(p.now())
	return out
}

// ephemeralStorage is upstream's calcEphemeralStorage for the CRI stats provider: the
// root filesystem's figures with the pod's usage, that is its containers' writable
// layers and logs, its ephemeral volumes, its own logs and its etc-hosts file.
func ephemeralStorage(containers []statsapi.ContainerStats, volumes []statsapi.VolumeStats, rootFs fsInfo, podLogs, etcHosts *statsapi.FsStats) *statsapi.FsStats {
	out := rootFs.baseFsStats()
	add := func(s *statsapi.FsStats) {
		if s == nil {
			return
		}
		out.UsedBytes = addUsage(out.UsedBytes, s.UsedBytes)
		out.InodesUsed = addUsage(out.InodesUsed, s.InodesUsed)
		if out.Time.Before(&s.Time) {
			out.Time = s.Time
		}
	}
	for _, c := range containers {
		if c.Rootfs == nil {
			continue
		}
		add(c.Rootfs)
		add(c.Logs)
	}
	for i := range volumes {
		add(&volumes[i].FsStats)
	}
	add(podLogs)
	add(etcHosts)
	return out
}

// addUsage is upstream's addUsage: nil plus x is x.
func addUsage(a, b *uint64) *uint64 {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	s := *a + *b
	return &s
}
