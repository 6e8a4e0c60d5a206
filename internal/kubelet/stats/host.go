package stats

import (
	"github.com/kubelet-dockershim/kubelet/internal/cgroups"

	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// hostReader reads the node's own figures from procRoot (/proc) and its cgroups
// (cgroups.Host, through the same proc filesystem). Platform files implement its
// methods.
type hostReader struct {
	procRoot string // "/proc"
	cgroups  *cgroups.Host
}

func newHostReader(procRoot string) *hostReader {
	return &hostReader{procRoot: procRoot, cgroups: cgroups.NewHost(procRoot)}
}

// fsInfo is what statfs says about a filesystem, in bytes and inodes.
type fsInfo struct {
	at         time.Time
	capacity   uint64
	available  uint64
	used       uint64
	inodes     uint64
	inodesFree uint64
}

// baseFsStats is the filesystem part of an FsStats (no usage): what upstream fills
// from cAdvisor's FsInfo before adding a consumer's usage.
func (f fsInfo) baseFsStats() *statsapi.FsStats {
	capacity, available, inodes, free := f.capacity, f.available, f.inodes, f.inodesFree
	return &statsapi.FsStats{
		Time:           metav1.NewTime(f.at),
		AvailableBytes: &available,
		CapacityBytes:  &capacity,
		Inodes:         &inodes,
		InodesFree:     &free,
	}
}

// fsStats is the whole filesystem's FsStats (node fs, image fs), usage included.
func (f fsInfo) fsStats(at time.Time) *statsapi.FsStats {
	s := f.baseFsStats()
	s.Time = metav1.NewTime(at)
	used, inodesUsed := f.used, subFloor(f.inodes, f.inodesFree)
	s.UsedBytes, s.InodesUsed = &used, &inodesUsed
	return s
}

// diskUsage is what a du-like walk found: bytes of allocated blocks and inodes.
type diskUsage struct {
	at     time.Time
	bytes  uint64
	inodes uint64
}

// errWalkTruncated marks a du-like walk that stopped at its entry limit; the usage
// found so far is still reported.
var errWalkTruncated = errors.New("too many entries, usage truncated")

// defaultInterfaceName is the interface upstream reports as the node's default one.
const defaultInterfaceName = "eth0"

// nodeSample is one reading of the node's CPU and memory.
type nodeSample struct {
	at              time.Time
	hasCPU          bool
	cpuNanos        uint64
	hasMemory       bool
	memUsage        uint64
	workingSet      uint64
	rss             uint64
	pageFaults      uint64
	majorPageFaults uint64
	memTotal        uint64 // MemTotal; 0 when unknown
	hasSwap         bool
	swapUsage       uint64
	swapFree        uint64
}

func subFloor(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}
