package dockershim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// Stats are cheap by design: the shim never calls Docker's stats API. A container's
// PID, cgroup parent and writable layer size come from one InspectContainerWithSize
// per container and per sizeTTL (single-flight, so concurrent requests share it), and
// are forgotten when Docker reports it started, died or was removed; CPU and memory
// are read from its cgroup files at each request, through files kept open
// (stats_cgfiles_linux.go). The list RPCs take their targets from one Docker list
// reused while Docker's events say nothing changed (stats_index.go).

const (
	// statsSizeTTL is how long a writable layer size (and the PID read with it) is reused.
	statsSizeTTL = time.Minute
	// statsEntryIdle drops cache entries of containers no request asked about for so long.
	statsEntryIdle = 10 * time.Minute
	// statsMinRateInterval is the shortest interval a CPU rate is computed over; closer
	// samples reuse the last rate.
	statsMinRateInterval = 100 * time.Millisecond
	// statsParallelism bounds concurrent per-container work of one list request.
	statsParallelism = 8
	// statsFileIdle closes cgroup files no request read for so long.
	statsFileIdle = 2 * time.Minute
	// statsInspectTimeout bounds one container's inspect for stats: a container
	// Docker cannot inspect (its storage hangs) is reported without usage rather
	// than holding the whole list (and the kubelet's /stats/summary) to the
	// kubelet's runtime request timeout. Such a container is not inspected again
	// for statsSizeTTL.
	statsInspectTimeout = 10 * time.Second
)

// errInspectStalled marks a container whose inspect for stats did not answer
// within statsInspectTimeout (recently).
var errInspectStalled = errors.New("docker did not answer the container's inspect in time")

// statsDocker is the part of Docker the stats collector uses.
type statsDocker interface {
	Info(ctx context.Context) (libdocker.Info, error)
	InspectContainerWithSize(ctx context.Context, id string) (libdocker.ContainerJSON, error)
}

// usageSample is one reading of a cgroup (or a sum of cgroups).
type usageSample struct {
	at              time.Time
	cpuNanos        uint64
	hasCPU          bool
	hasMemory       bool
	memUsage        uint64
	workingSet      uint64
	rss             uint64
	pageFaults      uint64
	majorPageFaults uint64
	memLimit        uint64 // 0: unlimited or unknown
	pids            uint64
	hasPids         bool
}

// add sums b into s (pod totals when the pod has no cgroup of its own).
func (s *usageSample) add(b usageSample) {
	s.cpuNanos += b.cpuNanos
	s.hasCPU = s.hasCPU || b.hasCPU
	s.memUsage += b.memUsage
	s.workingSet += b.workingSet
	s.rss += b.rss
	s.pageFaults += b.pageFaults
	s.majorPageFaults += b.majorPageFaults
	s.hasMemory = s.hasMemory || b.hasMemory
	s.pids += b.pids
	s.hasPids = s.hasPids || b.hasPids
}

// cpuTracker turns cumulative CPU usage into a rate using the previous sample.
type cpuTracker struct {
	prev    uint64
	prevAt  time.Time
	ok      bool
	rate    uint64
	hasRate bool
}

// update records a sample and returns the usage rate in nanocores, nil until two
// samples at least statsMinRateInterval apart exist.
func (t *cpuTracker) update(usage uint64, at time.Time) *runtimeapi.UInt64Value {
	switch {
	case !t.ok || usage < t.prev:
		t.prev, t.prevAt, t.ok, t.hasRate = usage, at, true, false
		return nil
	case at.Sub(t.prevAt) < statsMinRateInterval:
		// Too close to (or older than) the previous sample: keep the last rate.
	default:
		dt := at.Sub(t.prevAt).Seconds()
		t.rate = uint64(float64(usage-t.prev) / dt)
		t.hasRate = true
		t.prev, t.prevAt = usage, at
	}
	if !t.hasRate {
		return nil
	}
	return &runtimeapi.UInt64Value{Value: t.rate}
}

// statsEntry is what the collector remembers about one container (or sandbox).
type statsEntry struct {
	pid          int
	cgroupParent string
	sizeRw       uint64
	hasSize      bool
	inspectedAt  time.Time
	stalledAt    time.Time     // of the last inspect that timed out; zero: none
	refreshing   chan struct{} // non-nil while one request re-inspects
	cg           statsCgroup
	cgPid        int // PID cg was read for; 0 = no cgroup cached
	cpu          cpuTracker
	podCPU       cpuTracker
	usedAt       time.Time
	epoch        uint64 // bumped when an event made the facts stale (forget)
}

// statsView is a copy of an entry's inspect-derived facts.
type statsView struct {
	pid          int
	cgroupParent string
	sizeRw       uint64
	hasSize      bool
}

// statsCollector caches what stats need between requests. It also holds the image
// service's small caches (image users, image filesystem usage), which the Service
// struct has no other place for.
type statsCollector struct {
	docker  statsDocker
	logger  *zap.Logger
	cgroups *cgroupReader
	now     func() time.Time
	// inspectTimeout is statsInspectTimeout (shorter in tests).
	inspectTimeout time.Duration

	mu      sync.Mutex
	entries map[string]*statsEntry
	fsMount string // <docker root>/<storage driver>, read once

	index     statsIndex // managed containers, listed once for many requests
	watchOnce sync.Once  // registers the collector with the event broker

	imageUsers imageUserCache
	imageFs    imageFsCache
}

// newStatsCollector wires a collector; it does no I/O.
func newStatsCollector(d statsDocker, logger *zap.Logger) *statsCollector {
	if logger == nil {
		logger = zap.NewNop()
	}
	return &statsCollector{
		docker:         d,
		logger:         logger,
		cgroups:        newCgroupReader("/proc"),
		now:            time.Now,
		inspectTimeout: statsInspectTimeout,
		entries:        map[string]*statsEntry{},
		imageUsers:     imageUserCache{users: map[string]imageUser{}},
	}
}

// ensure returns an entry's facts, re-inspecting when they are older than statsSizeTTL
// or when a PID is needed and none is known. One request inspects at a time per
// container; others reuse stale facts or wait for it.
func (c *statsCollector) ensure(ctx context.Context, id string, needPid bool) (statsView, error) {
	for {
		c.mu.Lock()
		e := c.entries[id]
		if e == nil {
			e = &statsEntry{}
			c.entries[id] = e
		}
		now := c.now()
		e.usedAt = now
		known := !e.inspectedAt.IsZero() && !(needPid && e.pid == 0)
		if known && (now.Sub(e.inspectedAt) < statsSizeTTL || e.refreshing != nil) {
			v := e.view()
			c.mu.Unlock()
			return v, nil
		}
		if !known && !e.stalledAt.IsZero() && now.Sub(e.stalledAt) < statsSizeTTL {
			c.mu.Unlock()
			return statsView{}, errInspectStalled
		}
		if ch := e.refreshing; ch != nil {
			c.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return statsView{}, ctx.Err()
			}
		}
		ch := make(chan struct{})
		e.refreshing = ch
		epoch := e.epoch
		c.mu.Unlock()
		ictx, cancel := context.WithTimeout(ctx, c.inspectTimeout)
		j, err := c.docker.InspectContainerWithSize(ictx, id)
		stalled := err != nil && ictx.Err() == context.DeadlineExceeded && ctx.Err() == nil
		cancel()
		c.mu.Lock()
		e.refreshing = nil
		close(ch)
		if stalled {
			e.stalledAt = c.now()
			err = fmt.Errorf("%w (%v): %w", errInspectStalled, c.inspectTimeout, err)
		} else if err == nil {
			e.stalledAt = time.Time{}
		}
		if err != nil {
			if errors.Is(err, libdocker.ErrNotFound) {
				delete(c.entries, id)
			} else if known {
				v := e.view() // keep serving the stale facts; the next request retries
				c.mu.Unlock()
				c.logger.Debug("refresh container size", zap.String("id", id), zap.Error(err))
				return v, nil
			}
			c.mu.Unlock()
			return statsView{}, err
		}
		e.apply(j, c.now())
		if e.epoch != epoch {
			e.inspectedAt = time.Time{} // an event came meanwhile: inspect again next time
		}
		v := e.view()
		c.mu.Unlock()
		return v, nil
	}
}

func (e *statsEntry) view() statsView {
	return statsView{pid: e.pid, cgroupParent: e.cgroupParent, sizeRw: e.sizeRw, hasSize: e.hasSize}
}

// apply records an inspect result; a new PID resets the cgroup and CPU history.
func (e *statsEntry) apply(j libdocker.ContainerJSON, now time.Time) {
	pid := 0
	if j.ContainerJSONBase != nil && j.State != nil && j.State.Running {
		pid = j.State.Pid
	}
	if pid != e.pid {
		e.cgPid = 0
		e.cpu, e.podCPU = cpuTracker{}, cpuTracker{}
	}
	e.pid = pid
	e.inspectedAt = now
	if j.ContainerJSONBase == nil {
		return
	}
	if j.HostConfig != nil {
		e.cgroupParent = j.HostConfig.CgroupParent
	}
	if j.SizeRw != nil && *j.SizeRw >= 0 {
		e.sizeRw, e.hasSize = uint64(*j.SizeRw), true
	}
}

// sample reads the cgroup of entry id (its own, or its parent when pod is set).
func (c *statsCollector) sample(id string, pid int, pod bool) (usageSample, error) {
	c.mu.Lock()
	e := c.entries[id]
	var cg statsCgroup
	cached := e != nil && e.cgPid == pid
	if cached {
		cg = e.cg
	}
	c.mu.Unlock()
	if !cached {
		found, err := c.cgroups.lookup(pid)
		if err != nil {
			if errors.Is(err, errCgroupGone) {
				c.forgetPid(id, pid)
			}
			return usageSample{}, fmt.Errorf("cgroup of pid %d: %w", pid, err)
		}
		cg = found
		c.mu.Lock()
		if e := c.entries[id]; e != nil && e.pid == pid {
			e.cg, e.cgPid = cg, pid
		}
		c.mu.Unlock()
	}
	if pod {
		cg = c.cgroups.parent(cg)
	}
	s, err := c.cgroups.read(cg, c.now())
	if err != nil && errors.Is(err, errCgroupGone) {
		c.mu.Lock()
		if e := c.entries[id]; e != nil && e.pid == pid {
			// Stopped, or restarted with another PID: inspect again next time.
			e.cgPid, e.inspectedAt = 0, time.Time{}
		}
		c.mu.Unlock()
		c.cgroups.release(cg)
	}
	return s, err
}

// cpuRate feeds a CPU sample to entry id's tracker (the pod's when pod is set).
func (c *statsCollector) cpuRate(id string, pod bool, s usageSample) *runtimeapi.UInt64Value {
	if !s.hasCPU {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[id]
	if e == nil {
		return nil
	}
	if pod {
		return e.podCPU.update(s.cpuNanos, s.at)
	}
	return e.cpu.update(s.cpuNanos, s.at)
}

// forgetPid makes the next request inspect id again when its PID is still pid.
func (c *statsCollector) forgetPid(id string, pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.entries[id]; e != nil && e.pid == pid {
		e.cgPid, e.inspectedAt = 0, time.Time{}
	}
}

// prune forgets containers nobody asked about for statsEntryIdle and closes the
// cgroup files no request read for statsFileIdle.
func (c *statsCollector) prune() {
	c.mu.Lock()
	now := c.now()
	for id, e := range c.entries {
		if e.refreshing == nil && now.Sub(e.usedAt) > statsEntryIdle {
			delete(c.entries, id)
		}
	}
	c.mu.Unlock()
	c.cgroups.pruneFiles(now.Add(-statsFileIdle))
}

// writableLayersTotal sums the writable layer sizes known to the cache.
func (c *statsCollector) writableLayersTotal() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n uint64
	for _, e := range c.entries {
		if e.hasSize {
			n += e.sizeRw
		}
	}
	return n
}

// imageFsMount returns Docker's storage directory, <root dir>/<storage driver>, read
// from Docker once.
func (c *statsCollector) imageFsMount(ctx context.Context) (string, error) {
	c.mu.Lock()
	m := c.fsMount
	c.mu.Unlock()
	if m != "" {
		return m, nil
	}
	info, err := c.docker.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("read docker info: %w", err)
	}
	m = imageFsMountpoint(info)
	c.mu.Lock()
	c.fsMount = m
	c.mu.Unlock()
	return m, nil
}

// imageFsMountpoint is where Docker keeps layers: <root dir>/<storage driver>.
func imageFsMountpoint(info libdocker.Info) string {
	root := info.DockerRootDir
	if root == "" {
		root = "/var/lib/docker"
	}
	if info.Driver == "" {
		return root
	}
	return filepath.Join(root, info.Driver)
}

// statsTarget is a container (or sandbox) to report, with what a list already knows.
type statsTarget struct {
	id      string
	name    string
	typ     string // labelType: typeSandbox or typeContainer
	labels  map[string]string
	running bool
}

func targetOfSummary(c *libdocker.ContainerSummary) statsTarget {
	name := ""
	if len(c.Names) > 0 {
		name = c.Names[0]
	}
	return statsTarget{id: c.ID, name: name, typ: c.Labels[labelType], labels: c.Labels, running: c.State == "running"}
}

func targetOfJSON(j libdocker.ContainerJSON) statsTarget {
	t := statsTarget{id: j.ID, name: j.Name, running: j.State != nil && j.State.Running}
	if j.Config != nil {
		t.labels = j.Config.Labels
		t.typ = j.Config.Labels[labelType]
	}
	return t
}

// ContainerStats reports one container's CPU, memory and writable layer usage. A
// container that is not running gets its attributes and writable layer only.
func (s *Service) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	j, err := s.inspect(ctx, "container_id", req.GetContainerId(), typeContainer)
	if err != nil {
		return nil, err
	}
	st, _, err := s.containerStatsOf(ctx, targetOfJSON(j))
	if err != nil && !errors.Is(err, errCgroupGone) { // stopped meanwhile: no usage
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: st}, nil
}

// ListContainerStats reports the running containers matching the filter (id and
// pod_sandbox_id match by prefix, label_selector exactly). Containers that are not
// running are left out.
func (s *Service) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	st, err := s.listContainerStats(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListContainerStatsResponse{Stats: st}, nil
}

// StreamContainerStats is ListContainerStats sent in chunks.
func (s *Service) StreamContainerStats(req *runtimeapi.StreamContainerStatsRequest, stream runtimeapi.RuntimeService_StreamContainerStatsServer) error {
	st, err := s.listContainerStats(stream.Context(), req.GetFilter())
	if err != nil {
		return err
	}
	for _, part := range chunks(st, streamChunk) {
		if err := stream.Send(&runtimeapi.StreamContainerStatsResponse{ContainerStats: part}); err != nil {
			return fmt.Errorf("send container stats: %w", err)
		}
	}
	return nil
}

// containerStatsOf computes one container's stats and returns its raw cgroup sample
// (zero when it is not running) for pod totals. When its cgroup is gone (it stopped
// after it was listed) the error matches errCgroupGone and st has no usage.
func (s *Service) containerStatsOf(ctx context.Context, t statsTarget) (*runtimeapi.ContainerStats, usageSample, error) {
	labels, annotations := splitLabels(t.labels)
	st := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{
		Id:          t.id,
		Metadata:    containerMetadataOf(t.name, t.labels),
		Labels:      labels,
		Annotations: annotations,
	}}
	v, err := s.stats.ensure(ctx, t.id, t.running)
	if errors.Is(err, errInspectStalled) {
		s.logger.Info("Container reported without usage", zap.String("id", t.id), zap.Error(err))
		return st, usageSample{}, nil
	}
	if err != nil {
		return nil, usageSample{}, fmt.Errorf("inspect container %s: %w", t.id, err)
	}
	if v.hasSize {
		mount, err := s.stats.imageFsMount(ctx)
		if err != nil {
			s.logger.Debug("writable layer mountpoint", zap.Error(err))
		}
		st.WritableLayer = &runtimeapi.FilesystemUsage{
			Timestamp:  s.stats.now().UnixNano(),
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: mount},
			UsedBytes:  &runtimeapi.UInt64Value{Value: v.sizeRw},
			InodesUsed: &runtimeapi.UInt64Value{},
		}
	}
	if v.pid == 0 {
		return st, usageSample{}, nil
	}
	smp, err := s.stats.sample(t.id, v.pid, false)
	if errors.Is(err, errCgroupGone) {
		return st, usageSample{}, fmt.Errorf("container %s: %w", t.id, err)
	}
	if err != nil {
		s.logger.Debug("read container cgroup", zap.String("id", t.id), zap.Error(err))
		return st, usageSample{}, nil
	}
	st.Cpu = cpuUsageOf(smp, s.stats.cpuRate(t.id, false, smp))
	st.Memory = memoryUsageOf(smp)
	return st, smp, nil
}

// cpuUsageOf converts a sample; nil when it has no CPU figure.
func cpuUsageOf(s usageSample, rate *runtimeapi.UInt64Value) *runtimeapi.CpuUsage {
	if !s.hasCPU {
		return nil
	}
	return &runtimeapi.CpuUsage{
		Timestamp:            s.at.UnixNano(),
		UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: s.cpuNanos},
		UsageNanoCores:       rate,
	}
}

// memoryUsageOf converts a sample; nil when it has no memory figures.
func memoryUsageOf(s usageSample) *runtimeapi.MemoryUsage {
	if !s.hasMemory {
		return nil
	}
	m := &runtimeapi.MemoryUsage{
		Timestamp:       s.at.UnixNano(),
		WorkingSetBytes: &runtimeapi.UInt64Value{Value: s.workingSet},
		UsageBytes:      &runtimeapi.UInt64Value{Value: s.memUsage},
		RssBytes:        &runtimeapi.UInt64Value{Value: s.rss},
		PageFaults:      &runtimeapi.UInt64Value{Value: s.pageFaults},
		MajorPageFaults: &runtimeapi.UInt64Value{Value: s.majorPageFaults},
	}
	if s.memLimit > 0 {
		m.AvailableBytes = &runtimeapi.UInt64Value{Value: subFloorU64(s.memLimit, s.workingSet)}
	}
	return m
}

func subFloorU64(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
