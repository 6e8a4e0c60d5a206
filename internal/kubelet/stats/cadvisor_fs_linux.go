package stats

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubelettypes "k8s.io/kubelet/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

// The filesystem series of /metrics/cadvisor (container_fs_usage_bytes,
// container_fs_limit_bytes, container_fs_inodes_total, container_fs_inodes_free):
//
//   - the root row "/" has one set per partition, as cAdvisor's raw handler
//     reports the node's filesystems (fs.GetGlobalFsInfo): the mounts of
//     /proc/self/mountinfo, read once (at the first scrape here, at the start
//     in cAdvisor), whose type a kubelet's cAdvisor filesystem plugin handles.
//     The device label is the mount source for statfs filesystems (ext*, xfs,
//     btrfs, ...; the first mount of a source wins), the mountpoint for tmpfs and
//     "<source>_<major>-<minor>" for overlay; the mount at "/" is added last
//     under its source. Usage is capacity minus free blocks, limit the
//     capacity, inodes and free inodes from statfs, read at most every
//     cadvisorSpecPeriod. nfs and zfs mounts are left out: a statfs of a dead
//     NFS server would hold the scrape, and zfs datasets need libzfs;
//   - container rows have one set, as the dockershim-era cAdvisor's Docker
//     handler reported Docker containers: the device is the partition holding
//     the container's writable layer, the limit that filesystem's capacity,
//     and the usage the writable layer's size (the runtime's ContainerStats)
//     plus the container's log files (/var/log/pods/.../<container>/<attempt>.log*;
//     cAdvisor measured Docker's containers/<id> directory, where Docker kept
//     the log). Usage is refreshed every cadvisorFsPeriod, as cAdvisor's fs
//     handler. The inode series are not served for them: the runtime does not
//     count a writable layer's inodes (cAdvisor reported the layer's inode
//     usage as inodes_total and 0 free). Sandbox rows have none: the CRI reports
//     no writable layer for a sandbox;
//   - the diskstats series ride on the same filesystems
//     (cadvisor_diskstats_linux.go).

const (
	// cadvisorFsPeriod is how long a container's filesystem usage is reused
	// (cAdvisor's fs handler period).
	cadvisorFsPeriod = time.Minute
	// cadvisorFsRetry is how often, at most, the usage is asked again early
	// because a container row has none yet.
	cadvisorFsRetry = 10 * time.Second
)

// partition is a filesystem the root row reports.
type partition struct {
	key          string // device label, escaped
	mountPoint   string
	major, minor uint64
	fs           fsInfo
	ok           bool      // fs read by the last statfs
	disk         diskStats // its device's /proc/diskstats counters (cadvisor_diskstats_linux.go)
	at           time.Time
	// pending is set while a statfs runs (one at a time: a hung filesystem
	// holds one goroutine, not one per scrape).
	pending atomic.Bool
	mu      sync.Mutex // guards the statfs answer not taken yet
	result  fsInfo
	failed  bool
	// answered: result and failed are new.
	answered bool
}

// ctrFs is a container's measured usage.
type ctrFs struct {
	mountpoint string // the writable layer's filesystem (the runtime's FsId)
	bytes      uint64 // writable layer plus logs
}

// cadvisorFs is what the filesystem series are made of.
type cadvisorFs struct {
	loaded  bool
	parts   []*partition          // sorted by key
	byMount map[string]*partition // writable layer mountpoint → its partition (nil: none)
	usageAt time.Time             // when the last refresh started

	mu         sync.Mutex // guards usage, asked and refreshing
	usage      map[string]ctrFs
	asked      map[string]bool // the containers the last refresh knew (with or without a layer)
	refreshing bool
	refreshErr error // the last refresh's, not logged yet
	// refreshed, when set, is called after each refresh (tests).
	refreshed func()
}

// statfsTimeout bounds a scrape's wait for the statfs of the partitions
// (cAdvisor's 2 s); a partition not answered keeps its last figures.
const statfsTimeout = 2 * time.Second

// vfsTypes are the filesystem types cAdvisor's vfs plugin handles (statfs).
var vfsTypes = map[string]bool{
	"xfs": true, "squashfs": true, "f2fs": true, "jfs": true, "reiserfs": true, "hfs": true,
	"hfsplus": true, "ntfs": true, "vfat": true, "fat": true, "msdos": true, "exfat": true,
	"udf": true, "iso9660": true,
}

// partitionKey is the device label cAdvisor gives a mount, "" for a type it
// does not report.
func partitionKey(m procfs.Mount) string {
	switch {
	case strings.HasPrefix(m.FSType, "ext") || vfsTypes[m.FSType] || m.FSType == "btrfs":
		return m.Source
	case m.FSType == "tmpfs":
		return m.MountPoint
	case m.FSType == "overlay":
		return m.Source + "_" + strconv.FormatUint(m.Major, 10) + "-" + strconv.FormatUint(m.Minor, 10)
	}
	return ""
}

// choosePartitions picks the reported filesystems from mountinfo, as
// cAdvisor's processMounts does, sorted by device label.
func choosePartitions(mounts []procfs.Mount) []*partition {
	byKey := map[string]*partition{}
	for _, m := range mounts {
		key := partitionKey(m)
		if key == "" {
			continue
		}
		if _, dup := byKey[key]; dup && m.FSType != "tmpfs" {
			continue
		}
		p := &partition{key: escapeLabel(key), mountPoint: m.MountPoint, major: m.Major, minor: m.Minor}
		if m.FSType == "btrfs" && m.Major == 0 && strings.HasPrefix(m.Source, "/dev/") {
			if dev, err := deviceOf(m.MountPoint); err == nil {
				p.major, p.minor = uint64(unix.Major(dev)), uint64(unix.Minor(dev))
			}
		}
		byKey[key] = p
	}
	for _, m := range mounts { // the "root" label: the mount at "/" under its source
		if m.MountPoint == "/" {
			byKey[m.Source] = &partition{key: escapeLabel(m.Source), mountPoint: "/", major: m.Major, minor: m.Minor}
			break
		}
	}
	out := make([]*partition, 0, len(byKey))
	for _, p := range byKey {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// sampleFs reads the partitions (every cadvisorSpecPeriod), starts a refresh
// of the containers' usage when due and sets every row's filesystems.
func (c *cadvisor) sampleFs(ctx context.Context, now time.Time) error {
	f := &c.fs
	if !f.loaded {
		f.loaded = true
		mounts, err := procfs.ReadMountinfo(filepath.Join(c.p.host.procRoot, "self", "mountinfo"))
		if err != nil {
			return fmt.Errorf("read the node's filesystems: %w", err)
		}
		f.parts = choosePartitions(mounts)
	}
	c.statPartitions(now)
	c.refreshUsage(ctx, now)
	f.mu.Lock()
	usage, refreshErr := f.usage, f.refreshErr
	f.refreshErr = nil
	f.mu.Unlock()
	if refreshErr != nil { // cAdvisor logs a filesystem error; the scrape has none
		c.p.logger.Debug("cadvisor filesystem usage", zap.Error(refreshErr))
	}
	for _, r := range c.order {
		r.fs = r.fs[:0]
		switch {
		case r.kind == rowRoot:
			for _, p := range f.parts {
				if p.ok {
					r.fs = append(r.fs, rowFs{dev: p.key, limit: p.fs.capacity, usage: p.fs.used,
						inodes: p.fs.inodes, inodesFree: p.fs.inodesFree, hasInodes: true, disk: p.disk})
				}
			}
		case r.kind == rowContainer && !r.sandbox:
			u, ok := usage[r.cid]
			if !ok {
				continue
			}
			p := f.partitionOf(u.mountpoint)
			if p != nil && p.ok {
				r.fs = append(r.fs, rowFs{dev: p.key, limit: p.fs.capacity, usage: u.bytes})
			}
		}
	}
	return nil
}

// statPartitions reads the partitions due (every cadvisorSpecPeriod), each
// on its own goroutine, and waits at most statfsTimeout for them: a
// partition that does not answer keeps its last figures (and is not asked
// again while its statfs hangs). /proc/diskstats is read with them, once.
func (c *cadvisor) statPartitions(now time.Time) {
	var wg sync.WaitGroup
	started := false
	for _, p := range c.fs.parts {
		if !p.at.IsZero() && now.Sub(p.at) < cadvisorSpecPeriod || !p.pending.CompareAndSwap(false, true) {
			continue
		}
		p.at, started = now, true
		wg.Add(1)
		go func() {
			defer logging.HandleCrash(c.p.logger, "cadvisor statfs")
			defer wg.Done()
			fi, err := statFs(p.mountPoint, now)
			p.mu.Lock()
			p.result, p.failed = fi, err != nil
			p.answered = true
			p.mu.Unlock()
			p.pending.Store(false)
		}()
	}
	if started { // most scrapes fall between two readings: nothing to wait for
		c.readDiskstats() // while the statfs run
		c.waitStatfs(&wg)
	}
	for _, p := range c.fs.parts {
		p.mu.Lock()
		if p.answered {
			p.fs, p.ok, p.answered = p.result, !p.failed, false
		}
		p.mu.Unlock()
	}
}

// waitStatfs waits for the statfs goroutines of wg, at most statfsTimeout.
func (c *cadvisor) waitStatfs(wg *sync.WaitGroup) {
	waited := make(chan struct{})
	go func() {
		defer logging.HandleCrash(c.p.logger, "cadvisor statfs")
		wg.Wait()
		close(waited)
	}()
	select {
	case <-waited:
	case <-time.After(statfsTimeout):
		c.p.logger.Debug("A partition's statfs did not answer in time; its last figures are served")
	}
}

// partitionOf is the partition holding dir: the first (by label) whose device
// number is dir's, nil when none is (cAdvisor's GetDirFsDevice). The answer is
// kept: the partitions are read once, and a layer's directory stays put.
func (f *cadvisorFs) partitionOf(dir string) *partition {
	if p, ok := f.byMount[dir]; ok {
		return p
	}
	if dir == "" {
		return nil
	}
	dev, err := deviceOf(dir)
	if err != nil {
		return nil // not kept: the directory may appear
	}
	var found *partition
	major, minor := uint64(unix.Major(dev)), uint64(unix.Minor(dev))
	for _, p := range f.parts {
		if p.major == major && p.minor == minor {
			found = p
			break
		}
	}
	if f.byMount == nil {
		f.byMount = map[string]*partition{}
	}
	f.byMount[dir] = found
	return found
}

// refreshUsage starts, in the background (the scrape serves the last
// figures meanwhile), a refresh of every container's writable layer and log
// usage: every cadvisorFsPeriod, or after cadvisorFsRetry when a labelled
// container row appeared that the last refresh did not know.
func (c *cadvisor) refreshUsage(ctx context.Context, now time.Time) {
	f := &c.fs
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refreshing {
		return
	}
	if !f.usageAt.IsZero() {
		age := now.Sub(f.usageAt)
		if age < cadvisorFsRetry || (age < cadvisorFsPeriod && !c.newContainerLocked()) {
			return
		}
	}
	f.usageAt, f.refreshing = now, true
	logs := c.logDirs() // read c.meta here, under the scrape's lock
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer logging.HandleCrash(c.p.logger, "cadvisor filesystem usage")
		usage, asked, err := c.listUsage(ctx, logs)
		f.mu.Lock()
		if err == nil {
			f.usage, f.asked = usage, asked
		}
		f.refreshErr, f.refreshing = err, false // logged by the next scrape
		done := f.refreshed
		f.mu.Unlock()
		if done != nil {
			done()
		}
	}()
}

// listUsage asks ListContainerStats (bounded by cadvisorUsageTimeout) and
// adds each container's log files.
func (c *cadvisor) listUsage(ctx context.Context, logs map[string]logFiles) (map[string]ctrFs, map[string]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, cadvisorUsageTimeout)
	defer cancel()
	stats, err := c.p.runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, nil, fmt.Errorf("list the containers' filesystem usage: %w", err)
	}
	usage, asked := make(map[string]ctrFs, len(stats)), make(map[string]bool, len(stats))
	for _, st := range stats {
		id := st.GetAttributes().GetId()
		asked[id] = true
		wl := st.GetWritableLayer()
		if wl == nil || id == "" {
			continue
		}
		usage[id] = ctrFs{mountpoint: wl.GetFsId().GetMountpoint(), bytes: wl.GetUsedBytes().GetValue() + logs[id].bytes()}
	}
	return usage, asked, nil
}

// cadvisorUsageTimeout bounds one refresh of the containers' usage.
const cadvisorUsageTimeout = time.Minute

// newContainerLocked reports whether a labelled app container row is one the
// last refresh did not know (f.mu held).
func (c *cadvisor) newContainerLocked() bool {
	for _, r := range c.order {
		if r.kind == rowContainer && r.labeled && !r.sandbox && !c.fs.asked[r.cid] {
			return true
		}
	}
	return false
}

// logFiles are a container's log directory and the prefix of its attempt's
// files.
type logFiles struct{ dir, prefix string }

// logDirs are the log files of the containers the lists know.
func (c *cadvisor) logDirs() map[string]logFiles {
	out := map[string]logFiles{}
	if c.meta == nil {
		return out
	}
	for id, ctr := range c.meta.containers {
		l := ctr.GetLabels()
		ns, pod, uid := l[kubelettypes.KubernetesPodNamespaceLabel], l[kubelettypes.KubernetesPodNameLabel], l[kubelettypes.KubernetesPodUIDLabel]
		name := ctr.GetMetadata().GetName()
		if ns == "" || pod == "" || uid == "" || name == "" {
			continue
		}
		out[id] = logFiles{dir: filepath.Join(c.p.podLogsDir, ns+"_"+pod+"_"+uid, name),
			prefix: strconv.FormatUint(uint64(ctr.GetMetadata().GetAttempt()), 10) + ".log"}
	}
	return out
}

// bytes is the allocated size of the attempt's log files (<attempt>.log and
// its rotations); 0 for an unknown container.
func (l logFiles) bytes() uint64 {
	if l.dir == "" {
		return 0
	}
	entries, err := os.ReadDir(l.dir)
	if err != nil {
		return 0
	}
	var total uint64
	for _, e := range entries {
		if e.IsDir() || !strings.HasPrefix(e.Name(), l.prefix) {
			continue
		}
		if u, err := fileUsage(filepath.Join(l.dir, e.Name())); err == nil {
			total += u.bytes
		}
	}
	return total
}
