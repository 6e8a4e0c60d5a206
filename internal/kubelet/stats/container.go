package stats

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// containerConverter turns CRI container stats into summary ContainerStats, like
// upstream's makeContainerStats (full) and makeContainerCPUAndMemoryStats.
type containerConverter struct {
	p    *Provider
	full bool
	// fsOf describes the filesystem mounted at a writable layer's mountpoint; nil
	// when it cannot be read. Only used when full.
	fsOf func(mountpoint string) *fsInfo
}

// container converts one container's stats. CPU, memory and swap are always set, with
// zeros for what the runtime left out (as upstream); the start time is the
// container's creation. Logs are added by the caller.
func (c containerConverter) container(st *runtimeapi.ContainerStats, ctr *runtimeapi.Container) statsapi.ContainerStats {
	name := st.GetAttributes().GetMetadata().GetName()
	if name == "" {
		name = ctr.GetMetadata().GetName()
	}
	now := metav1.NewTime(c.p.now())
	zeroMissing := !c.full
	out := statsapi.ContainerStats{Name: name, StartTime: metav1.NewTime(time.Unix(0, ctr.GetCreatedAt()))}

	if cpu := st.GetCpu(); cpu != nil {
		out.CPU = &statsapi.CPUStats{
			Time:                 metav1.NewTime(time.Unix(0, cpu.GetTimestamp())),
			UsageNanoCores:       c.p.nanoCores(ctr.GetId(), cpu),
			UsageCoreNanoSeconds: valueOf(cpu.GetUsageCoreNanoSeconds()),
		}
		if out.CPU.UsageCoreNanoSeconds == nil && zeroMissing {
			out.CPU.UsageCoreNanoSeconds = new(uint64)
		}
	} else {
		out.CPU = &statsapi.CPUStats{Time: now, UsageNanoCores: new(uint64), UsageCoreNanoSeconds: new(uint64)}
	}

	if mem := st.GetMemory(); mem != nil {
		out.Memory = memoryStats(mem, zeroMissing)
	} else {
		out.Memory = &statsapi.MemoryStats{Time: now, UsageBytes: new(uint64), WorkingSetBytes: new(uint64), RSSBytes: new(uint64)}
		if zeroMissing {
			out.Memory.AvailableBytes, out.Memory.PageFaults, out.Memory.MajorPageFaults = new(uint64), new(uint64), new(uint64)
		}
	}

	if sw := st.GetSwap(); sw != nil {
		out.Swap = &statsapi.SwapStats{
			Time:               metav1.NewTime(time.Unix(0, sw.GetTimestamp())),
			SwapUsageBytes:     valueOf(sw.GetSwapUsageBytes()),
			SwapAvailableBytes: valueOf(sw.GetSwapAvailableBytes()),
		}
		if zeroMissing {
			out.Swap.SwapUsageBytes = orZero(out.Swap.SwapUsageBytes)
			out.Swap.SwapAvailableBytes = orZero(out.Swap.SwapAvailableBytes)
		}
	} else {
		out.Swap = &statsapi.SwapStats{Time: now, SwapUsageBytes: new(uint64), SwapAvailableBytes: new(uint64)}
	}

	if c.full {
		out.Rootfs = c.rootfs(st.GetWritableLayer())
	}
	return out
}

// rootfs is the container's writable layer: its usage from the runtime, the
// filesystem figures from statfs of the layer's mountpoint.
func (c containerConverter) rootfs(wl *runtimeapi.FilesystemUsage) *statsapi.FsStats {
	out := &statsapi.FsStats{}
	if wl == nil {
		return out
	}
	out.Time = metav1.NewTime(time.Unix(0, wl.GetTimestamp()))
	out.UsedBytes = valueOf(wl.GetUsedBytes())
	out.InodesUsed = valueOf(wl.GetInodesUsed())
	mp := wl.GetFsId().GetMountpoint()
	if mp == "" || c.fsOf == nil {
		return out
	}
	if fi := c.fsOf(mp); fi != nil {
		base := fi.baseFsStats()
		out.AvailableBytes, out.CapacityBytes = base.AvailableBytes, base.CapacityBytes
		out.Inodes, out.InodesFree = base.Inodes, base.InodesFree
	}
	return out
}

func orZero(v *uint64) *uint64 {
	if v == nil {
		return new(uint64)
	}
	return v
}
