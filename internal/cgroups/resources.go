package cgroups

import (
	"fmt"
	"strings"
)

// Upstream's CPU constants (pkg/kubelet/cm).
const (
	MinShares     = 2
	MaxShares     = 262144
	SharesPerCPU  = 1024
	MilliCPUToCPU = 1000
	// QuotaPeriod is the default CFS period, in microseconds.
	QuotaPeriod = 100000
	// MinQuotaPeriod is the kernel's smallest cfs_quota_us.
	MinQuotaPeriod = 1000
)

// Resources are what the kubelet writes into a cgroup; nil fields are left
// as they are.
type Resources struct {
	CPUShares *uint64 // v1 cpu.shares; v2 cpu.weight by CPUSharesToWeight
	CPUQuota  *int64  // microseconds per period; -1 unlimited
	CPUPeriod *uint64 // microseconds
	Memory    *int64  // bytes
	PidsLimit *int64  // -1 unlimited
}

// MilliCPUToShares converts CPU requests in millicores to cpu.shares: 0 is the
// minimum (2), else m*1024/1000 clamped to [2, 262144].
func MilliCPUToShares(m int64) uint64 {
	if m == 0 {
		return MinShares
	}
	shares := m * SharesPerCPU / MilliCPUToCPU
	return uint64(min(max(shares, MinShares), MaxShares))
}

// MilliCPUToQuota converts a CPU limit in millicores to cfs_quota_us for
// period (microseconds): 0 stays 0 (no limit), else m*period/1000, at least
// MinQuotaPeriod.
func MilliCPUToQuota(m, period int64) int64 {
	if m == 0 {
		return 0
	}
	return max(m*period/MilliCPUToCPU, MinQuotaPeriod)
}

// CPUSharesToWeight converts cpu.shares to cgroup v2's cpu.weight as the
// kubelet does for its own cgroups: 1 + (shares-2)*9999/262142 (2 -> 1,
// 1024 -> 39, 262144 -> 10000).
func CPUSharesToWeight(shares uint64) uint64 {
	if shares >= MaxShares {
		return 10000
	}
	if shares < MinShares {
		shares = MinShares
	}
	return 1 + (shares-2)*9999/262142
}

// WeightToCPUShares inverts CPUSharesToWeight (upstream's v2 read-back):
// 2 + (weight-1)*262142/9999.
func WeightToCPUShares(w uint64) uint64 {
	if w <= 1 {
		return MinShares
	}
	return 2 + (w-1)*262142/9999
}

// SharesToMilliCPU converts cpu.shares back to a cpu request in millicores,
// rounding up (upstream's): 0 below the minimum shares.
func SharesToMilliCPU(shares uint64) int64 {
	if shares < MinShares {
		return 0
	}
	return int64((shares*MilliCPUToCPU + SharesPerCPU - 1) / SharesPerCPU)
}

// QuotaToMilliCPU converts a CFS quota and period back to a cpu limit in
// millicores: 0 for no limit (a negative quota) or no period.
func QuotaToMilliCPU(quota int64, period uint64) int64 {
	if quota < 0 || period == 0 {
		return 0
	}
	return quota * MilliCPUToCPU / int64(period)
}

// SharesHoldRequest reports whether cpu.shares read from a cgroup are what a
// cpu request of milliCPU writes there, read back: the same shares (cgroup
// v1), or the same after their conversion to cpu.weight and back (v2, which
// loses precision).
func SharesHoldRequest(shares uint64, milliCPU int64) bool {
	written := MilliCPUToShares(milliCPU)
	return shares == written || shares == WeightToCPUShares(CPUSharesToWeight(written))
}

// String lists the set fields, e.g. "cpu.shares=512 cpu.cfs_quota_us=50000".
func (rc *Resources) String() string {
	if rc == nil {
		return "{}"
	}
	var parts []string
	if rc.CPUShares != nil {
		parts = append(parts, fmt.Sprintf("cpu.shares=%d", *rc.CPUShares))
	}
	if rc.CPUQuota != nil {
		parts = append(parts, fmt.Sprintf("cpu.cfs_quota_us=%d", *rc.CPUQuota))
	}
	if rc.CPUPeriod != nil {
		parts = append(parts, fmt.Sprintf("cpu.cfs_period_us=%d", *rc.CPUPeriod))
	}
	if rc.Memory != nil {
		parts = append(parts, fmt.Sprintf("memory=%d", *rc.Memory))
	}
	if rc.PidsLimit != nil {
		parts = append(parts, fmt.Sprintf("pids.max=%d", *rc.PidsLimit))
	}
	return "{" + strings.Join(parts, " ") + "}"
}
