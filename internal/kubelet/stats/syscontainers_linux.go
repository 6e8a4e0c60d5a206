package stats

import (
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// systemContainers are the node's system containers as upstream reports
// them: "kubelet" (the kubelet's own cgroup, started at boot), "runtime"
// (--runtime-cgroups, when set) and "pods" (the node-allocatable cgroup,
// kubepods, when the kubelet manages one), each with its cgroup's cpu and
// memory. A cgroup that cannot be read is left out (logged).
func (p *Provider) systemContainers(now time.Time) []statsapi.ContainerStats {
	host := p.host.cgroups
	type sys struct {
		name  string
		paths func() (cgroups.Paths, error)
		start time.Time
	}
	list := []sys{{name: statsapi.SystemContainerKubelet, start: p.bootTime(), paths: func() (cgroups.Paths, error) {
		return host.Process(0)
	}}}
	named := func(name string) func() (cgroups.Paths, error) {
		return func() (cgroups.Paths, error) { return host.Named(name) }
	}
	if p.runtimeCgroup != "" {
		list = append(list, sys{name: statsapi.SystemContainerRuntime, paths: named(p.runtimeCgroup), start: p.started})
	}
	if p.podsCgroup != "" {
		list = append(list, sys{name: statsapi.SystemContainerPods, paths: named(p.podsCgroup), start: p.started})
	}
	var out []statsapi.ContainerStats
	for _, s := range list {
		paths, err := s.paths()
		if err != nil {
			p.logger.Debug("system container cgroup", zap.String("name", s.name), zap.Error(err))
			continue
		}
		sample, err := cgroups.ReadSample(paths)
		if err != nil {
			p.logger.Debug("system container stats", zap.String("name", s.name), zap.Error(err))
			continue
		}
		cs := statsapi.ContainerStats{Name: s.name, StartTime: metav1.NewTime(s.start)}
		at := metav1.NewTime(now)
		if sample.HasCPU {
			usage := sample.CPUNanos
			rate, _ := p.rates.update("sys/"+s.name, usage, now.UnixNano(), minRateInterval)
			cs.CPU = &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: &usage, UsageNanoCores: rate}
		}
		if sample.HasMemory {
			mem := sample.Memory
			cs.Memory = &statsapi.MemoryStats{Time: at, UsageBytes: &mem.Usage, WorkingSetBytes: &mem.WorkingSet,
				RSSBytes: &mem.RSS, PageFaults: &mem.PageFaults, MajorPageFaults: &mem.MajorPageFaults}
			if mem.Limit > 0 { // unlimited: no available bytes, as upstream
				avail := subFloor(mem.Limit, mem.WorkingSet)
				cs.Memory.AvailableBytes = &avail
			}
		}
		out = append(out, cs)
	}
	return out
}
