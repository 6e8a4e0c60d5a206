package dockershim

import (
	"errors"
	"io"
	"path"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

// Cgroup reading for container and pod stats. The shim never asks Docker for stats:
// it finds a container's cgroups from /proc/<pid>/cgroup of its init process and reads
// the controller files directly, through internal/cgroups (v1, hybrid and v2 hosts;
// mount roots other than "/" for nested containers). This file only adapts cgroupfs to
// the names stats_linux.go uses.

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

// errCgroupGone means the cgroup directory no longer exists (the container stopped).
var errCgroupGone = cgroups.ErrGone

// cgroupMounts are the mounted cgroup hierarchies.
type cgroupMounts = cgroups.Mounts

// procCgroup is a parsed /proc/<pid>/cgroup.
type procCgroup = cgroups.ProcCgroup

// cgroupPaths are the directories stats are read from: cgroups.Paths under the field
// names the stats code uses. With v2 set only unified is used.
type cgroupPaths struct {
	v2      bool
	unified string
	cpuacct string
	memory  string
	pids    string
}

func fromCgroupfs(p cgroups.Paths) cgroupPaths {
	return cgroupPaths{v2: p.V2, unified: p.Unified, cpuacct: p.CPUAcct, memory: p.Memory, pids: p.Pids}
}

func (p cgroupPaths) cgroupfs() cgroups.Paths {
	return cgroups.Paths{V2: p.v2, Unified: p.unified, CPUAcct: p.cpuacct, Memory: p.memory, Pids: p.pids}
}

// parseCgroupMountinfo reads the cgroup mounts of a mountinfo file; a host without any
// cgroup hierarchy is an error, since no container could be measured.
func parseCgroupMountinfo(r io.Reader) (cgroupMounts, error) {
	m, err := cgroups.ParseMountinfo(r)
	if err != nil {
		return m, err
	}
	if m.Mode() == cgroups.ModeNone {
		return m, errors.New("no cgroup hierarchy is mounted")
	}
	return m, nil
}

func parseProcCgroup(r io.Reader) (procCgroup, error) {
	return cgroups.ParseProcCgroup(r)
}

// resolveCgroupPaths joins a process's cgroup paths with the mounts (cgroups.Resolve).
func resolveCgroupPaths(m cgroupMounts, p procCgroup) (cgroupPaths, error) {
	out, err := cgroups.Resolve(m, p)
	if err != nil {
		return cgroupPaths{}, err
	}
	return fromCgroupfs(out), nil
}

// parent returns the paths one level up (the pod's cgroup for a container).
func (p cgroupPaths) parent() cgroupPaths {
	return fromCgroupfs(p.cgroupfs().Parent())
}

// readCgroupSample reads cpu, memory and pids figures of one cgroup.
func readCgroupSample(p cgroupPaths, now time.Time) (usageSample, error) {
	c, err := cgroups.ReadSample(p.cgroupfs())
	if err != nil {
		return usageSample{at: now}, err
	}
	return usageSampleOf(c, now), nil
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
