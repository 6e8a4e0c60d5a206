package stats

import (
	"context"
	"fmt"
	"sort"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// runtimeView is everything one Summary asks the runtime: three list calls, whatever
// the number of pods, or only ListPodSandboxStats while the other two are kept.
type runtimeView struct {
	sandboxes  map[string]*runtimeapi.PodSandbox // terminated duplicates removed
	containers map[string]*runtimeapi.Container  // running containers
	// podStats is ListPodSandboxStats' answer; nil when the runtime does not implement
	// it, and containerStats (ListContainerStats) is used instead.
	podStats       []*runtimeapi.PodSandboxStats
	containerStats []*runtimeapi.ContainerStats
}

// listRuntime runs ListPodSandbox, ListContainers and ListPodSandboxStats
// concurrently, or ListPodSandboxStats alone when the kept lists cover its answer
// (runtimelists.go). A runtime that answers Unimplemented to ListPodSandboxStats is
// asked ListContainerStats instead, then and on every later Summary.
func (p *Provider) listRuntime(ctx context.Context) (*runtimeView, error) {
	cached, podStats, asked, psErr := p.podStatsCached(ctx)
	if cached != nil {
		return cached, nil
	}
	var (
		sbs          []*runtimeapi.PodSandbox
		cs           []*runtimeapi.Container
		sbErr, csErr error
	)
	at := p.now()
	var podSandboxStats func()
	strict := !p.noPodStats.Load()
	if strict && !asked {
		podSandboxStats = func() { podStats, psErr = p.runtime.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{}) }
	}
	running := &runtimeapi.ContainerFilter{State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
	p.together(
		func() { sbs, sbErr = p.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{}) },
		func() { cs, csErr = p.runtime.ListContainers(ctx, running) },
		podSandboxStats,
	)
	if sbErr != nil {
		return nil, fmt.Errorf("list pod sandboxes: %w", sbErr)
	}
	if csErr != nil {
		return nil, fmt.Errorf("list containers: %w", csErr)
	}
	if strict && psErr != nil {
		if status.Code(psErr) != codes.Unimplemented {
			return nil, fmt.Errorf("list pod sandbox stats: %w", psErr)
		}
		p.noPodStats.Store(true)
		p.lists.forget()
		p.logger.Info("the runtime does not implement ListPodSandboxStats; using ListContainerStats", zap.Error(psErr))
		strict = false
	}
	v := newRuntimeView(sbs, cs)
	if strict {
		v.podStats = podStats
		if v.podStats == nil {
			v.podStats = []*runtimeapi.PodSandboxStats{}
		}
		p.lists.store(v, sbs, v.podStats, at)
		return v, nil
	}
	st, err := p.runtime.ListContainerStats(ctx, &runtimeapi.ContainerStatsFilter{})
	if err != nil {
		return nil, fmt.Errorf("list container stats: %w", err)
	}
	v.containerStats = st
	return v, nil
}

// newRuntimeView indexes the lists: sandboxes without terminated duplicates, running
// containers.
func newRuntimeView(sbs []*runtimeapi.PodSandbox, cs []*runtimeapi.Container) *runtimeView {
	v := &runtimeView{sandboxes: map[string]*runtimeapi.PodSandbox{}, containers: map[string]*runtimeapi.Container{}}
	for _, sb := range removeTerminatedPods(sbs) {
		v.sandboxes[sb.GetId()] = sb
	}
	for _, c := range cs {
		if c.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
			v.containers[c.GetId()] = c
		}
	}
	return v
}

// removeTerminatedPods keeps, of sandboxes sharing a pod name and namespace (a pod
// recreated, or a sandbox replaced), the ready ones, or the newest when none is
// ready, like upstream.
func removeTerminatedPods(sbs []*runtimeapi.PodSandbox) []*runtimeapi.PodSandbox {
	type ref struct{ name, namespace string }
	byRef := map[ref][]*runtimeapi.PodSandbox{}
	var order []ref
	for _, sb := range sbs {
		r := ref{sb.GetMetadata().GetName(), sb.GetMetadata().GetNamespace()}
		if _, ok := byRef[r]; !ok {
			order = append(order, r)
		}
		byRef[r] = append(byRef[r], sb)
	}
	var out []*runtimeapi.PodSandbox
	for _, r := range order {
		group := byRef[r]
		if len(group) == 1 {
			out = append(out, group[0])
			continue
		}
		sort.SliceStable(group, func(i, j int) bool { return group[i].GetCreatedAt() < group[j].GetCreatedAt() })
		ready := false
		for _, sb := range group {
			if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
				out, ready = append(out, sb), true
			}
		}
		if !ready {
			out = append(out, group[len(group)-1])
		}
	}
	return out
}

// buildPods turns the runtime's answers into PodStats, sorted by namespace, name and
// UID. full adds the container writable layers, pod network and process counts
// (storage is added by the caller); otherwise it is CPU, memory and swap only.
func (p *Provider) buildPods(v *runtimeView, full bool, fsOf func(mountpoint string) *fsInfo) []statsapi.PodStats {
	conv := containerConverter{p: p, full: full, fsOf: fsOf}
	var out []statsapi.PodStats
	if v.podStats != nil {
		for _, sst := range v.podStats {
			sb, ok := v.sandboxes[sst.GetAttributes().GetId()]
			if !ok {
				continue
			}
			out = append(out, p.podFromSandboxStats(sst, sb, v.containers, conv))
		}
	} else {
		out = p.podsFromContainerStats(v, conv)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].PodRef, out[j].PodRef
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.UID < b.UID
	})
	return out
}

// newPodStats is a pod's identity; its start time is the sandbox's creation.
func newPodStats(sb *runtimeapi.PodSandbox) statsapi.PodStats {
	md := sb.GetMetadata()
	return statsapi.PodStats{
		PodRef:    statsapi.PodReference{Name: md.GetName(), Namespace: md.GetNamespace(), UID: md.GetUid()},
		StartTime: metav1.NewTime(time.Unix(0, sb.GetCreatedAt())),
	}
}

// podFromSandboxStats converts one ListPodSandboxStats entry (upstream's
// listPodStatsStrictlyFromCRI); containers that are not running are left out.
func (p *Provider) podFromSandboxStats(sst *runtimeapi.PodSandboxStats, sb *runtimeapi.PodSandbox,
	containers map[string]*runtimeapi.Container, conv containerConverter) statsapi.PodStats {
	ps := newPodStats(sb)
	linux := sst.GetLinux()
	for _, cst := range linux.GetContainers() {
		c, ok := containers[cst.GetAttributes().GetId()]
		if !ok {
			continue
		}
		ps.Containers = append(ps.Containers, conv.container(cst, c))
	}
	if cpu := linux.GetCpu(); cpu != nil {
		ps.CPU = &statsapi.CPUStats{
			Time:                 metav1.NewTime(time.Unix(0, cpu.GetTimestamp())),
			UsageCoreNanoSeconds: valueOf(cpu.GetUsageCoreNanoSeconds()),
			UsageNanoCores:       p.nanoCores("pod/"+sb.GetId(), cpu),
		}
	}
	if mem := linux.GetMemory(); mem != nil {
		ps.Memory = memoryStats(mem, false)
	}
	ps.Swap = sumSwap(ps.Containers)
	if conv.full {
		ps.Network = networkStats(linux.GetNetwork())
		if pr := linux.GetProcess(); pr != nil {
			ps.ProcessStats = &statsapi.ProcessStats{ProcessCount: valueOf(pr.GetProcessCount())}
		}
	}
	return ps
}

// podsFromContainerStats groups ListContainerStats by sandbox, pod CPU and memory being
// the containers' sums (upstream's path without cAdvisor pod cgroups).
func (p *Provider) podsFromContainerStats(v *runtimeView, conv containerConverter) []statsapi.PodStats {
	byID := map[string]*statsapi.PodStats{}
	var order []string
	for _, cst := range v.containerStats {
		c, ok := v.containers[cst.GetAttributes().GetId()]
		if !ok {
			continue
		}
		sb, ok := v.sandboxes[c.GetPodSandboxId()]
		if !ok {
			continue
		}
		ps := byID[sb.GetId()]
		if ps == nil {
			s := newPodStats(sb)
			ps = &s
			byID[sb.GetId()] = ps
			order = append(order, sb.GetId())
		}
		cs := conv.container(cst, c)
		addContainerCPUMemory(ps, &cs)
		ps.Containers = append(ps.Containers, cs)
	}
	out := make([]statsapi.PodStats, 0, len(order))
	for _, id := range order {
		ps := byID[id]
		ps.Swap = sumSwap(ps.Containers)
		out = append(out, *ps)
	}
	return out
}

// addContainerCPUMemory adds a container's CPU and memory to its pod's sums.
func addContainerCPUMemory(ps *statsapi.PodStats, cs *statsapi.ContainerStats) {
	if cs.CPU != nil {
		if ps.CPU == nil {
			ps.CPU = &statsapi.CPUStats{}
		}
		ps.CPU.Time = cs.CPU.Time
		ps.CPU.UsageCoreNanoSeconds = sumPtr(ps.CPU.UsageCoreNanoSeconds, cs.CPU.UsageCoreNanoSeconds)
		ps.CPU.UsageNanoCores = sumPtr(ps.CPU.UsageNanoCores, cs.CPU.UsageNanoCores)
	}
	if m := cs.Memory; m != nil {
		if ps.Memory == nil {
			ps.Memory = &statsapi.MemoryStats{}
		}
		pm := ps.Memory
		pm.Time = m.Time
		pm.AvailableBytes = sumPtr(pm.AvailableBytes, m.AvailableBytes)
		pm.UsageBytes = sumPtr(pm.UsageBytes, m.UsageBytes)
		pm.WorkingSetBytes = sumPtr(pm.WorkingSetBytes, m.WorkingSetBytes)
		pm.RSSBytes = sumPtr(pm.RSSBytes, m.RSSBytes)
		pm.PageFaults = sumPtr(pm.PageFaults, m.PageFaults)
		pm.MajorPageFaults = sumPtr(pm.MajorPageFaults, m.MajorPageFaults)
	}
}

// sumPtr adds two optional counters, treating nil as 0 (upstream's ptr.Deref sums).
func sumPtr(a, b *uint64) *uint64 {
	var s uint64
	if a != nil {
		s += *a
	}
	if b != nil {
		s += *b
	}
	return &s
}

// sumSwap is the pod's swap as the sum of its containers' (the CRI has no pod swap).
func sumSwap(cs []statsapi.ContainerStats) *statsapi.SwapStats {
	var out *statsapi.SwapStats
	for _, c := range cs {
		if c.Swap == nil {
			continue
		}
		if out == nil {
			out = &statsapi.SwapStats{}
		}
		out.Time = c.Swap.Time
		out.SwapAvailableBytes = sumPtr(out.SwapAvailableBytes, c.Swap.SwapAvailableBytes)
		out.SwapUsageBytes = sumPtr(out.SwapUsageBytes, c.Swap.SwapUsageBytes)
	}
	return out
}

// nanoCores is the runtime's usageNanoCores, or the rate since the previous sample of
// key when the runtime left it out.
func (p *Provider) nanoCores(key string, cpu *runtimeapi.CpuUsage) *uint64 {
	if r := cpu.GetUsageNanoCores(); r != nil {
		v := r.GetValue()
		return &v
	}
	if cpu.GetUsageCoreNanoSeconds() == nil {
		return nil
	}
	rate, _ := p.rates.update(key, cpu.GetUsageCoreNanoSeconds().GetValue(), cpu.GetTimestamp(), minRateInterval)
	return rate
}

// valueOf unwraps an optional CRI counter.
func valueOf(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	x := v.GetValue()
	return &x
}

// memoryStats converts CRI memory usage; zeroMissing turns absent figures into 0
// (upstream's resource-metrics path).
func memoryStats(m *runtimeapi.MemoryUsage, zeroMissing bool) *statsapi.MemoryStats {
	get := func(v *runtimeapi.UInt64Value) *uint64 {
		if v == nil && zeroMissing {
			return new(uint64)
		}
		return valueOf(v)
	}
	return &statsapi.MemoryStats{
		Time:            metav1.NewTime(time.Unix(0, m.GetTimestamp())),
		AvailableBytes:  get(m.GetAvailableBytes()),
		UsageBytes:      get(m.GetUsageBytes()),
		WorkingSetBytes: get(m.GetWorkingSetBytes()),
		RSSBytes:        get(m.GetRssBytes()),
		PageFaults:      get(m.GetPageFaults()),
		MajorPageFaults: get(m.GetMajorPageFaults()),
	}
}

// networkStats converts a sandbox's network usage; nil without one.
func networkStats(n *runtimeapi.NetworkUsage) *statsapi.NetworkStats {
	if n == nil {
		return nil
	}
	out := &statsapi.NetworkStats{
		Time:           metav1.NewTime(time.Unix(0, n.GetTimestamp())),
		InterfaceStats: interfaceStats(n.GetDefaultInterface()),
		Interfaces:     make([]statsapi.InterfaceStats, 0, len(n.GetInterfaces())),
	}
	for _, i := range n.GetInterfaces() {
		out.Interfaces = append(out.Interfaces, interfaceStats(i))
	}
	return out
}

func interfaceStats(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
	return statsapi.InterfaceStats{
		Name:     i.GetName(),
		RxBytes:  valueOf(i.GetRxBytes()),
		RxErrors: valueOf(i.GetRxErrors()),
		TxBytes:  valueOf(i.GetTxBytes()),
		TxErrors: valueOf(i.GetTxErrors()),
	}
}
