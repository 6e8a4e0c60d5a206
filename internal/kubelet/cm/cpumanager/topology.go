package cpumanager

import (
	"fmt"

	"k8s.io/utils/cpuset"
)

// CPUInfo places one logical CPU in the machine's topology.
type CPUInfo struct {
	// NUMANodeID is the NUMA node holding the CPU.
	NUMANodeID int
	// SocketID is the physical package (socket) holding the CPU.
	SocketID int
	// CoreID names the physical core of the CPU. As upstream does, it is the
	// lowest logical CPU ID among the core's threads, so it is unique on the
	// machine (sysfs core_id values repeat across sockets).
	CoreID int
	// UncoreCacheID names the last-level cache the CPU shares with only part
	// of its NUMA node (cAdvisor's uncore cache: a level 3 or higher cache
	// not shared by the whole node); it is the socket ID when there is none,
	// as upstream falls back.
	UncoreCacheID int
}

// CPUDetails maps logical CPU IDs to their place in the topology.
type CPUDetails map[int]CPUInfo

// Topology is the machine's CPU layout: logical CPUs (hardware threads),
// physical cores, sockets and NUMA nodes.
type Topology struct {
	// NumCPUs is the number of online logical CPUs.
	NumCPUs int
	// NumCores is the number of physical cores.
	NumCores int
	// NumSockets is the number of sockets.
	NumSockets int
	// NumNUMANodes is the number of NUMA nodes that hold CPUs.
	NumNUMANodes int
	// CPUDetails places every logical CPU.
	CPUDetails CPUDetails
}

// NewTopology builds a Topology from the placement of every CPU and checks
// that it is consistent.
func NewTopology(details CPUDetails) (*Topology, error) {
	if len(details) == 0 {
		return nil, fmt.Errorf("could not detect number of cpus")
	}
	for cpu, info := range details {
		owner, ok := details[info.CoreID]
		if !ok || owner.CoreID != info.CoreID || info.CoreID > cpu {
			return nil, fmt.Errorf("cpu %d: core id %d is not the lowest cpu of its core", cpu, info.CoreID)
		}
		if owner.SocketID != info.SocketID || owner.NUMANodeID != info.NUMANodeID {
			return nil, fmt.Errorf("cpu %d: threads of core %d are on different sockets or NUMA nodes", cpu, info.CoreID)
		}
	}
	return &Topology{
		NumCPUs:      len(details),
		NumCores:     details.Cores().Size(),
		NumSockets:   details.Sockets().Size(),
		NumNUMANodes: details.NUMANodes().Size(),
		CPUDetails:   details,
	}, nil
}

// CPUsPerCore is the number of hardware threads per core (0 without cores).
func (t *Topology) CPUsPerCore() int {
	if t.NumCores == 0 {
		return 0
	}
	return t.NumCPUs / t.NumCores
}

// CPUsPerSocket is the number of logical CPUs per socket (0 without sockets).
func (t *Topology) CPUsPerSocket() int {
	if t.NumSockets == 0 {
		return 0
	}
	return t.NumCPUs / t.NumSockets
}

// String summarises the topology for logs.
func (t *Topology) String() string {
	return fmt.Sprintf("%d CPUs, %d cores, %d sockets, %d NUMA nodes",
		t.NumCPUs, t.NumCores, t.NumSockets, t.NumNUMANodes)
}

// sameUncoreCache reports whether every CPU of cpus shares one uncore cache
// (upstream's isAlignedAtUncoreCache; true for one CPU or none).
func (d CPUDetails) sameUncoreCache(cpus cpuset.CPUSet) bool {
	list := cpus.List()
	for _, cpu := range list {
		if info, ok := d[cpu]; !ok || info.UncoreCacheID != d[list[0]].UncoreCacheID {
			return false
		}
	}
	return true
}

// KeepOnly returns the details of the CPUs of d that are in cpus.
func (d CPUDetails) KeepOnly(cpus cpuset.CPUSet) CPUDetails {
	out := CPUDetails{}
	for cpu, info := range d {
		if cpus.Contains(cpu) {
			out[cpu] = info
		}
	}
	return out
}

// CPUs returns every CPU of d.
func (d CPUDetails) CPUs() cpuset.CPUSet {
	ids := make([]int, 0, len(d))
	for cpu := range d {
		ids = append(ids, cpu)
	}
	return cpuset.New(ids...)
}

// collect returns the set of key(info) over the CPUs of d that match.
func (d CPUDetails) collect(match func(CPUInfo) bool, key func(cpu int, info CPUInfo) int) cpuset.CPUSet {
	var ids []int
	for cpu, info := range d {
		if match(info) {
			ids = append(ids, key(cpu, info))
		}
	}
	return cpuset.New(ids...)
}

func anyInfo(CPUInfo) bool                { return true }
func cpuKey(cpu int, _ CPUInfo) int       { return cpu }
func coreKey(_ int, info CPUInfo) int     { return info.CoreID }
func socketKey(_ int, info CPUInfo) int   { return info.SocketID }
func numaNodeKey(_ int, info CPUInfo) int { return info.NUMANodeID }
func inSet(ids []int) func(v int) bool    { s := cpuset.New(ids...); return s.Contains }
func bySocket(ids []int) func(CPUInfo) bool {
	in := inSet(ids)
	return func(i CPUInfo) bool { return in(i.SocketID) }
}
func byNUMANode(ids []int) func(CPUInfo) bool {
	in := inSet(ids)
	return func(i CPUInfo) bool { return in(i.NUMANodeID) }
}
func byCore(ids []int) func(CPUInfo) bool {
	in := inSet(ids)
	return func(i CPUInfo) bool { return in(i.CoreID) }
}

// Cores returns the core IDs of d.
func (d CPUDetails) Cores() cpuset.CPUSet { return d.collect(anyInfo, coreKey) }

// Sockets returns the socket IDs of d.
func (d CPUDetails) Sockets() cpuset.CPUSet { return d.collect(anyInfo, socketKey) }

// NUMANodes returns the NUMA node IDs of d.
func (d CPUDetails) NUMANodes() cpuset.CPUSet { return d.collect(anyInfo, numaNodeKey) }

// CPUsInCores returns the CPUs of d on the given cores.
func (d CPUDetails) CPUsInCores(ids ...int) cpuset.CPUSet { return d.collect(byCore(ids), cpuKey) }

// CPUsInSockets returns the CPUs of d on the given sockets.
func (d CPUDetails) CPUsInSockets(ids ...int) cpuset.CPUSet { return d.collect(bySocket(ids), cpuKey) }

// CPUsInNUMANodes returns the CPUs of d on the given NUMA nodes.
func (d CPUDetails) CPUsInNUMANodes(ids ...int) cpuset.CPUSet {
	return d.collect(byNUMANode(ids), cpuKey)
}

// CoresInSockets returns the cores of d on the given sockets.
func (d CPUDetails) CoresInSockets(ids ...int) cpuset.CPUSet {
	return d.collect(bySocket(ids), coreKey)
}

// CoresInNUMANodes returns the cores of d on the given NUMA nodes.
func (d CPUDetails) CoresInNUMANodes(ids ...int) cpuset.CPUSet {
	return d.collect(byNUMANode(ids), coreKey)
}

// SocketsInNUMANodes returns the sockets of d on the given NUMA nodes.
func (d CPUDetails) SocketsInNUMANodes(ids ...int) cpuset.CPUSet {
	return d.collect(byNUMANode(ids), socketKey)
}

// NUMANodesInSockets returns the NUMA nodes of d on the given sockets.
func (d CPUDetails) NUMANodesInSockets(ids ...int) cpuset.CPUSet {
	return d.collect(bySocket(ids), numaNodeKey)
}
