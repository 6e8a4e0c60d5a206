package dockershim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// statsCgroup is where one container's cgroup files are.
type statsCgroup = cgroups.Paths

// errCgroupGone means the cgroup directory no longer exists (the container stopped).
var errCgroupGone = cgroups.ErrGone

// cgroupReader finds cgroups through procRoot (/proc, cgroups.Host) and reads them
// through files kept open between requests (cgroups.HeldFiles: one pread per file
// instead of open, read and close). Files are closed when their container dies or is
// removed (statsCollector observes Docker's events), when their cgroup is removed,
// and when no request read them for statsFileIdle.
type cgroupReader struct {
	procRoot string
	host     *cgroups.Host
	files    *cgroups.HeldFiles
}

func newCgroupReader(procRoot string) *cgroupReader {
	return &cgroupReader{procRoot: procRoot, host: cgroups.NewHost(procRoot), files: cgroups.NewHeldFiles()}
}

// lookup finds the cgroup directories of process pid.
func (r *cgroupReader) lookup(pid int) (statsCgroup, error) { return r.host.Process(pid) }

// parent is the cgroup one level up (the pod's cgroup for a container).
func (r *cgroupReader) parent(cg statsCgroup) statsCgroup { return cg.Parent() }

// read samples one cgroup through the held files.
func (r *cgroupReader) read(cg statsCgroup, now time.Time) (usageSample, error) {
	c, err := r.files.Sample(cg, now)
	if err != nil {
		return usageSample{at: now}, err
	}
	return usageSampleOf(c, now), nil
}

// release closes the held files of a container's cgroup (it died or was removed).
func (r *cgroupReader) release(cg statsCgroup) {
	r.files.Release(cg.Unified, cg.CPUAcct, cg.Memory, cg.Pids)
}

// pruneFiles closes the files no request read since before.
func (r *cgroupReader) pruneFiles(before time.Time) { r.files.Prune(before) }

// network reads the interfaces of pid's network namespace from /proc/<pid>/net/dev
// (the file shows the namespace of the process that is named), except loopback.
func (r *cgroupReader) network(pid int, now time.Time) (*runtimeapi.NetworkUsage, error) {
	// Read and closed at once: an open net/dev would keep the namespace alive.
	path := filepath.Join(r.procRoot, strconv.Itoa(pid), "net", "dev")
	var ifs []*runtimeapi.NetworkInterfaceUsage
	err := r.files.ReadUnheld(path, func(b []byte) error {
		var err error
		ifs, err = parseNetDev(b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("net/dev of pid %d: %w", pid, err)
	}
	out := &runtimeapi.NetworkUsage{Timestamp: now.UnixNano()}
	for _, i := range ifs {
		if i.GetName() == "lo" {
			continue
		}
		out.Interfaces = append(out.Interfaces, i)
		if i.GetName() == "eth0" || out.DefaultInterface == nil {
			out.DefaultInterface = i
		}
	}
	return out, nil
}

// parseNetDev parses /proc/net/dev: two header lines, then "name: 16 counters" where
// counter 0 is rx bytes, 2 rx errors, 8 tx bytes and 10 tx errors.
func parseNetDev(b []byte) ([]*runtimeapi.NetworkInterfaceUsage, error) {
	var out []*runtimeapi.NetworkInterfaceUsage
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || strings.Contains(name, "|") {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("net/dev line for %q has %d fields, want 16", strings.TrimSpace(name), len(f))
		}
		var v [16]uint64
		for i := range v {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("net/dev %q field %d: %w", strings.TrimSpace(name), i, err)
			}
			v[i] = n
		}
		out = append(out, &runtimeapi.NetworkInterfaceUsage{
			Name:     strings.TrimSpace(name),
			RxBytes:  &runtimeapi.UInt64Value{Value: v[0]},
			RxErrors: &runtimeapi.UInt64Value{Value: v[2]},
			TxBytes:  &runtimeapi.UInt64Value{Value: v[8]},
			TxErrors: &runtimeapi.UInt64Value{Value: v[10]},
		})
	}
	return out, sc.Err()
}

// fsUsedBytes is the used space of the filesystem holding path.
func fsUsedBytes(path string) (uint64, bool) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, false
	}
	return (st.Blocks - st.Bfree) * uint64(st.Bsize), true
}

// PodSandboxStats reports a sandbox's CPU, memory, process count, network and the
// stats of its running containers.
func (s *Service) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	j, err := s.inspect(ctx, "pod_sandbox_id", req.GetPodSandboxId(), typeSandbox)
	if err != nil {
		return nil, err
	}
	cs, err := s.listManaged(ctx, typeContainer, labelSandboxID+"="+j.ID)
	if err != nil {
		return nil, fmt.Errorf("list containers of sandbox %s: %w", j.ID, err)
	}
	st, _ := s.podStatsOf(ctx, targetOfJSON(j), runningTargets(cs))
	return &runtimeapi.PodSandboxStatsResponse{Stats: st}, nil
}

// ListPodSandboxStats reports the running sandboxes matching the filter (id by prefix,
// label_selector exactly).
func (s *Service) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	st, err := s.listPodStats(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListPodSandboxStatsResponse{Stats: st}, nil
}

// StreamPodSandboxStats is ListPodSandboxStats sent in chunks.
func (s *Service) StreamPodSandboxStats(req *runtimeapi.StreamPodSandboxStatsRequest, stream runtimeapi.RuntimeService_StreamPodSandboxStatsServer) error {
	st, err := s.listPodStats(stream.Context(), req.GetFilter())
	if err != nil {
		return err
	}
	for _, part := range chunks(st, streamChunk) {
		if err := stream.Send(&runtimeapi.StreamPodSandboxStatsResponse{PodSandboxStats: part}); err != nil {
			return fmt.Errorf("send pod sandbox stats: %w", err)
		}
	}
	return nil
}

func (s *Service) listPodStats(ctx context.Context, f *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	defer s.stats.prune()
	all, err := s.statsTargets(ctx)
	if err != nil {
		return nil, err
	}
	bySandbox := map[string][]statsTarget{}
	var sandboxes []statsTarget
	for _, t := range all {
		switch {
		case !t.running:
		case t.typ == typeContainer:
			bySandbox[t.labels[labelSandboxID]] = append(bySandbox[t.labels[labelSandboxID]], t)
		case t.typ == typeSandbox && podStatsMatch(t, f):
			sandboxes = append(sandboxes, t)
		}
	}
	stats := make([]*runtimeapi.PodSandboxStats, len(sandboxes))
	s.statsForEach(len(sandboxes), func(i int) {
		st, gone := s.podStatsOf(ctx, sandboxes[i], bySandbox[sandboxes[i].id])
		if gone {
			s.stats.index.invalidate() // stopped since it was listed: list again next time
			return
		}
		stats[i] = st
	})
	out := make([]*runtimeapi.PodSandboxStats, 0, len(stats))
	for _, st := range stats {
		if st != nil {
			out = append(out, st)
		}
	}
	return out, nil
}

// podStatsMatch applies a PodSandboxStatsFilter to a sandbox.
func podStatsMatch(t statsTarget, f *runtimeapi.PodSandboxStatsFilter) bool {
	if f == nil {
		return true
	}
	if f.GetId() != "" && !strings.HasPrefix(t.id, f.GetId()) {
		return false
	}
	labels, _ := splitLabels(t.labels)
	return matchLabels(f.GetLabelSelector(), labels)
}

func runningTargets(cs []libdocker.ContainerSummary) []statsTarget {
	var out []statsTarget
	for i := range cs {
		if t := targetOfSummary(&cs[i]); t.running {
			out = append(out, t)
		}
	}
	return out
}

// podStatsOf builds a sandbox's stats. Pod totals come from the pod's own cgroup (the
// parent of the sandbox container's, when a cgroup parent was set) or else from the
// sum of the sandbox's and its containers' cgroups. Failures leave fields empty; gone
// reports a sandbox listed as running whose process or cgroup is gone (it stopped).
func (s *Service) podStatsOf(ctx context.Context, sb statsTarget, containers []statsTarget) (_ *runtimeapi.PodSandboxStats, gone bool) {
	labels, annotations := splitLabels(sb.labels)
	linux := &runtimeapi.LinuxPodSandboxStats{}
	out := &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{
			Id: sb.id, Metadata: sandboxMetadataOf(sb.name, sb.labels), Labels: labels, Annotations: annotations,
		},
		Linux: linux,
	}
	cstats, samples := s.containerStatsAll(ctx, containers, false)
	linux.Containers = cstats
	if !sb.running {
		return out, false
	}
	v, err := s.stats.ensure(ctx, sb.id, true)
	if err != nil || v.pid == 0 {
		s.logger.Debug("sandbox stats: no running sandbox process", zap.String("id", sb.id), zap.Error(err))
		return out, err == nil || errors.Is(err, libdocker.ErrNotFound)
	}
	total, err := s.podUsage(sb.id, v, samples)
	if errors.Is(err, errCgroupGone) {
		s.logger.Debug("sandbox cgroup is gone", zap.String("id", sb.id), zap.Error(err))
		return out, true
	}
	if err != nil {
		s.logger.Debug("sandbox cgroup", zap.String("id", sb.id), zap.Error(err))
	} else {
		linux.Cpu = cpuUsageOf(total, s.stats.cpuRate(sb.id, true, total))
		linux.Memory = memoryUsageOf(total)
		if total.hasPids {
			linux.Process = &runtimeapi.ProcessUsage{Timestamp: total.at.UnixNano(), ProcessCount: &runtimeapi.UInt64Value{Value: total.pids}}
		}
	}
	if !sandboxHostNetwork(sb.labels) {
		n, err := s.stats.cgroups.network(v.pid, s.stats.now())
		if err != nil {
			s.logger.Debug("sandbox network stats", zap.String("id", sb.id), zap.Error(err))
		}
		linux.Network = n
	}
	return out, false
}

// podUsage reads the pod cgroup, or sums the sandbox's and its containers' samples.
func (s *Service) podUsage(id string, v statsView, containers []usageSample) (usageSample, error) {
	if v.cgroupParent != "" {
		return s.stats.sample(id, v.pid, true)
	}
	total, err := s.stats.sample(id, v.pid, false)
	if err != nil {
		return total, err
	}
	for _, c := range containers {
		total.add(c)
	}
	total.memLimit = 0
	return total, nil
}

// sandboxHostNetwork reports whether the sandbox shares the host's network namespace
// (its net/dev would show the host's interfaces).
func sandboxHostNetwork(labels map[string]string) bool {
	return labels[labelHostNetwork] == "true" || namespaceOptions(labels).GetNetwork() == runtimeapi.NamespaceMode_NODE
}
