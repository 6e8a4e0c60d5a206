// Package cgroups is the cgroup layer, the one place that names cgroup files
// (internal/archtest's TestCgroupFilesOnlyInCgroupLayer keeps it so). It writes the kubelet's cgroups
// through a Driver (create, update, destroy, read back by Name; NewCgroupfs
// writes the cgroup filesystem, v1 and v2 each in a file of its own), names
// them per driver kind (Kind.Path, Kind.Parse: cgroupfs or systemd), holds
// what is written (Resources) with upstream's CPU conversions, and reads
// Linux cgroup statistics straight from the cgroup filesystem: where the hierarchies are mounted and in which mode (v1, hybrid, v2),
// which cgroup a process is in, and a cgroup's CPU usage, memory (usage, working set,
// RSS, page faults, limit) and process count.
//
// It is a neutral leaf: of this module it imports only internal/procfs, so both
// halves of the binary may import it — the dockershim (container and pod sandbox stats) and the
// kubelet side (internal/kubelet/stats, the node's root cgroup) — without either one
// importing the other. internal/archtest keeps it a leaf.
//
// Figures follow runc's cgroup managers, which cAdvisor and the kubelet read through:
//
//   - v1: cpuacct.usage; memory.usage_in_bytes, memory.limit_in_bytes and the
//     hierarchical total_* fields of memory.stat; pids.current.
//   - v2: usage_usec of cpu.stat; memory.current, memory.max and memory.stat (anon,
//     inactive_file, pgfault, pgmajfault); pids.current.
//   - working set = usage - inactive_file, floored at 0.
//
// Where the hierarchies are mounted and which cgroup a process is in come from
// a Host (its mountinfo read once; Root, Process, Named, and the walk of
// /metrics/cadvisor: Exists, Children, Cadvisor); nothing outside the layer
// reads mountinfo or /proc/<pid>/cgroup for cgroups. Typical use, for the
// cgroup of process pid:
//
//	host := cgroups.NewHost("/proc")
//	paths, err := host.Process(pid)
//	sample, err := cgroups.ReadSample(paths) // errors.Is(err, cgroups.ErrGone) once it stopped
//
// HeldFiles keeps the files of known cgroups open and re-reads them with one pread
// each (the dockershim's container stats and the kubelet's /metrics/cadvisor use
// it); the caller owns it and closes files with Release and Prune. Its
// ReadCadvisor and ReadCadvisorSpec read a v1 cgroup's figures and
// configuration the way cAdvisor (through runc's cgroup managers) does, for
// /metrics/cadvisor.
//
// The package starts no goroutines and keeps no package-level state. What it
// holds belongs to values the caller owns: a MemoryThreshold (the eventfd
// registered on a v1 memory cgroup for the eviction manager's
// kernelMemcgNotification, which waits on it itself) and HeldFiles; every other
// call reads the files anew.
package cgroups
