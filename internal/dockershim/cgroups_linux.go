package dockershim

import (
	"path"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// Cgroup reading for container and pod stats. The shim never asks Docker for stats:
// it finds a container's cgroups from /proc/<pid>/cgroup of its init process and reads
// the controller files directly, through internal/cgroups (v1, hybrid and v2 hosts;
// mount roots other than "/" for nested containers).

// dockerCgroupParent converts the kubelet's cgroup_parent for Docker: with
// Docker's systemd driver the kubelet gives the expanded slice path
// (/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice)
// and Docker wants the slice's name (its last element), as the old dockershim
// gave it; with cgroupfs the path as it is.
func (s *Service) dockerCgroupParent(parent string) string {
	if parent == "" || s.host.cgroupDriver != "systemd" {
		return parent
	}
	return path.Base(parent)
}

// usageSampleOf is the usage of a cgroup sample read at now.
func usageSampleOf(c cgroups.Sample, now time.Time) usageSample {
	return usageSample{
		at:              now,
		cpuNanos:        c.CPUNanos,
		hasCPU:          c.HasCPU,
		hasMemory:       c.HasMemory,
		memUsage:        c.Memory.Usage,
		workingSet:      c.Memory.WorkingSet,
		rss:             c.Memory.RSS,
		pageFaults:      c.Memory.PageFaults,
		majorPageFaults: c.Memory.MajorPageFaults,
		memLimit:        c.Memory.Limit,
		pids:            c.Pids,
		hasPids:         c.HasPids,
	}
}
