package stats

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// collect finds the rows, labels new ones and samples them all at now. On a host
// without cgroup hierarchies only the root row is served, without cgroup figures.
func (c *cadvisor) collect(ctx context.Context, now time.Time) error {
	refs, walkErr := c.walk()
	listErr := c.syncRows(ctx, refs, now, c.newRow)
	c.sample(now)
	fsErr := c.sampleFs(ctx, now)
	c.files.Prune(now.Add(-cadvisorFileIdle))
	return errors.Join(walkErr, listErr, fsErr)
}

// walk lists the rows: "/", then (v1 memory hierarchy or cgroup2) --runtime-cgroups when
// set, the node-allocatable cgroup, the QoS cgroups under it, the pod cgroups
// under either (pod<uid>, or kubepods-...-pod<uid>.slice with the systemd
// driver) and the container cgroups under those (<id>, or docker-<id>.scope). A node-allocatable
// cgroup not made yet is no error.
func (c *cadvisor) walk() ([]rowRef, error) {
	host := c.p.host.cgroups
	refs := make([]rowRef, 1, len(c.rows)+1)
	refs[0] = rowRef{id: "/", kind: rowRoot}
	if _, ok, err := host.Cadvisor("/"); err != nil || !ok {
		return refs, err
	}
	// --runtime-cgroups is one of the kubelet's cAdvisor roots too.
	if rc := path.Clean("/" + c.p.runtimeCgroup); c.p.runtimeCgroup != "" && rc != "/" && host.Exists(rc) {
		refs = append(refs, rowRef{id: rc, kind: rowRaw})
	}
	if c.p.podsCgroup == "" {
		return refs, nil
	}
	kp := path.Clean("/" + c.p.podsCgroup)
	names, err := host.Children(kp)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return refs, nil
		}
		return refs, err
	}
	refs = append(refs, rowRef{id: kp, kind: rowRaw})
	for _, n := range names {
		id := path.Join(kp, n)
		if uid, ok := cgroups.PodUID(n); ok {
			refs = walkPod(host, id, uid, refs)
			continue
		}
		refs = append(refs, rowRef{id: id, kind: rowRaw})
		sub, _ := host.Children(id)
		for _, s := range sub {
			if uid, ok := cgroups.PodUID(s); ok {
				refs = walkPod(host, path.Join(id, s), uid, refs)
			}
		}
	}
	return refs, nil
}

// walkPod adds a pod cgroup and its container cgroups.
func walkPod(host *cgroups.Host, id, uid string, refs []rowRef) []rowRef {
	refs = append(refs, rowRef{id: id, kind: rowPod, podUID: uid})
	cs, _ := host.Children(id)
	for _, dir := range cs {
		refs = append(refs, rowRef{id: path.Join(id, dir), kind: rowContainer, podUID: uid, cid: cgroups.ContainerID(dir)})
	}
	return refs
}

// newRow makes a row for a cgroup found: its directories and, for rows the CRI
// does not date, the start time cAdvisor's raw handler gives (label overrides it
// for containers).
func (c *cadvisor) newRow(ref rowRef) *cadRow {
	r := &cadRow{id: ref.id, kind: ref.kind, podUID: ref.podUID, cid: ref.cid}
	if d, ok, err := c.p.host.cgroups.Cadvisor(ref.id); err == nil && ok {
		r.dirs = d
	}
	r.start = float64(c.cgroupCreated(r.dirs).Unix())
	return r
}

// cgroupCreated is cAdvisor's creation time of a raw cgroup
// (cgroups.CadvisorDirs.Created), not before the boot.
func (c *cadvisor) cgroupCreated(d cgroups.CadvisorDirs) time.Time {
	boot := c.p.bootTime()
	if oldest := d.Created(); !oldest.IsZero() && !oldest.Before(boot) {
		return oldest
	}
	return boot
}

// sample reads every row's stats (and its spec when due), and the network of the
// root and sandbox rows, on up to cadvisorWorkers goroutines (the reads are
// system calls, most of their cost in the kernel).
func (c *cadvisor) sample(now time.Time) {
	workers := min(runtime.GOMAXPROCS(0), cadvisorWorkers, len(c.order))
	var next atomic.Int64
	var wg sync.WaitGroup
	var panicked atomic.Value
	for range workers {
		wg.Go(func() {
			defer func() {
				// Handed to the request's goroutine, whose HTTP edge recovers it.
				if v := recover(); v != nil {
					panicked.Store(fmt.Sprint(v))
				}
			}()
			for {
				i := int(next.Add(1)) - 1
				if i >= len(c.order) {
					return
				}
				c.sampleRow(c.order[i], now)
			}
		})
	}
	wg.Wait()
	if v := panicked.Load(); v != nil {
		panic(v)
	}
	for _, r := range c.order {
		if r.ok {
			r.devs = c.deviceNames(r.stats.IO, r.devs[:0])
		}
	}
}

// cadvisorWorkers bounds the goroutines of one scrape's reads.
const cadvisorWorkers = 4

func (c *cadvisor) sampleRow(r *cadRow, now time.Time) {
	r.at = now.UnixMilli()
	if r.specAt.IsZero() || now.Sub(r.specAt) >= cadvisorSpecPeriod {
		r.spec, r.specAt = c.files.ReadCadvisorSpec(r.dirs), now
		r.dirs.BlkioFile = c.files.BlkioFileV1(r.dirs.Blkio)
		if r.kind == rowRoot { // the root's limits are the machine's (raw handler)
			r.spec.HasMemory, r.spec.Limit, r.spec.SwapLimit = true, c.machine.memory, c.machine.swap
		}
	}
	r.ok = c.files.ReadCadvisor(&r.dirs, now, &r.stats) == nil
	if c.p.oomKills != nil {
		r.ooms = c.p.oomKills.Count(r.id)
	}
	switch {
	case r.kind == rowRoot:
		if r.ok && !r.stats.HasMemory {
			c.rootMemory(now, &r.stats)
		}
		r.net = c.readNetDev(filepath.Join(c.p.host.procRoot, "1", "net", "dev"), r.net)
	case r.sandbox:
		c.sandboxNet(r)
	}
}

// rootMemory fills the root row's memory on cgroup v2, whose root cgroup
// has no memory.current: the node's figures of /stats/summary (runc's
// rootStatsFromMeminfo: usage MemTotal - MemFree, the rest from the root's
// memory.stat).
func (c *cadvisor) rootMemory(now time.Time, s *cgroups.CadvisorStats) {
	n, err := c.p.host.readRoot(now, false) // the row's CPU is read already
	if err != nil || !n.hasMemory {
		return
	}
	s.HasMemory, s.MemUsage, s.WorkingSet, s.RSS = true, n.memUsage, n.workingSet, n.rss
}

// sandboxNet reads the pod's interfaces from the net/dev of a process in the
// sandbox's cgroup (its network namespace), finding the process again when the
// one known is gone.
func (c *cadvisor) sandboxNet(r *cadRow) {
	for attempt := 0; attempt < 2; attempt++ {
		if r.pid == 0 {
			r.pid = c.files.FirstProc(r.dirs.ProcsDir())
			if r.pid == 0 {
				r.net = r.net[:0]
				return
			}
		}
		var ok bool
		r.net, ok = c.readNetDevOK(filepath.Join(c.p.host.procRoot, strconv.Itoa(r.pid), "net", "dev"), r.net)
		if ok {
			return
		}
		r.pid = 0
	}
}

func (c *cadvisor) readNetDev(path string, out []netIface) []netIface {
	out, _ = c.readNetDevOK(path, out)
	return out
}

func (c *cadvisor) readNetDevOK(path string, out []netIface) ([]netIface, bool) {
	err := c.files.ReadUnheld(path, func(b []byte) error {
		out = parseNetDevCounters(b, out[:0])
		return nil
	})
	if err != nil {
		return out[:0], false
	}
	return out, true
}

// deviceNames names blkio devices as /dev/<kernel name> (from /sys/dev/block),
// "major:minor" when unknown; names are cached.
func (c *cadvisor) deviceNames(io []cgroups.DeviceIO, out []string) []string {
	for _, d := range io {
		key := [2]uint64{d.Major, d.Minor}
		name, ok := c.devNames[key]
		if !ok {
			num := strconv.FormatUint(d.Major, 10) + ":" + strconv.FormatUint(d.Minor, 10)
			name = num
			if target, err := os.Readlink("/sys/dev/block/" + num); err == nil {
				name = "/dev/" + filepath.Base(target)
			}
			name = escapeLabel(name)
			c.devNames[key] = name
		}
		out = append(out, name)
	}
	return out
}

// parseNetDevCounters appends the interfaces of a /proc/<pid>/net/dev to out,
// without those cAdvisor ignores (lo, veth*, docker*, nerdctl*); names already in
// out's backing array at the same place are reused.
func parseNetDevCounters(b []byte, out []netIface) []netIface {
	// net/dev columns after "name:": rx bytes packets errs drop fifo frame
	// compressed multicast, then tx bytes packets errs drop ...
	idx := [8]int{0, 1, 2, 3, 8, 9, 10, 11}
	for len(b) > 0 {
		var line []byte
		line, b = cgroups.NextLine(b)
		name, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok || bytes.IndexByte(name, '|') >= 0 {
			continue
		}
		name = bytes.TrimSpace(name)
		if ignoredInterface(string(name)) {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) < 12 {
			continue
		}
		var n netIface
		if len(out) < cap(out) && out[:len(out)+1][len(out)].name == string(name) {
			n.name = out[:len(out)+1][len(out)].name
		} else {
			n.name = string(name)
		}
		for i, col := range idx {
			n.v[i], _ = strconv.ParseUint(string(f[col]), 10, 64)
		}
		out = append(out, n)
	}
	return out
}
