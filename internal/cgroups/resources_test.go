package cgroups

import "testing"

func TestCPUConversions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		milli  int64
		shares uint64
		quota  int64
	}{
		{0, 2, 0}, {1, 2, 1000}, {5, 5, 1000}, {100, 102, 10000}, {250, 256, 25000}, {1000, 1024, 100000},
		{1500, 1536, 150000}, {300000, 262144, 30000000},
	} {
		if got := MilliCPUToShares(tc.milli); got != tc.shares {
			t.Errorf("MilliCPUToShares(%d) = %d, want %d", tc.milli, got, tc.shares)
		}
		if got := MilliCPUToQuota(tc.milli, QuotaPeriod); got != tc.quota {
			t.Errorf("MilliCPUToQuota(%d) = %d, want %d", tc.milli, got, tc.quota)
		}
	}
	for shares, weight := range map[uint64]uint64{2: 1, 1024: 39, 262144: 10000, 0: 1, 102: 4} {
		if got := CPUSharesToWeight(shares); got != weight {
			t.Errorf("CPUSharesToWeight(%d) = %d, want %d", shares, got, weight)
		}
	}
}

// The read-back conversions the pod status uses: shares and quotas back to
// millicores (rounding up, as upstream), cpu.weight back to shares, and
// whether read-back shares hold a request on cgroup v1 or v2.
func TestCPUReadBack(t *testing.T) {
	t.Parallel()
	for shares, milli := range map[uint64]int64{0: 0, 1: 0, 2: 2, 81: 80, 102: 100, 1024: 1000, 1025: 1001} {
		if got := SharesToMilliCPU(shares); got != milli {
			t.Errorf("SharesToMilliCPU(%d) = %d, want %d", shares, got, milli)
		}
	}
	for _, tc := range []struct {
		quota  int64
		period uint64
		milli  int64
	}{{-1, 100000, 0}, {8000, 0, 0}, {8000, 100000, 80}, {2500, 100000, 25}, {50000, 50000, 1000}} {
		if got := QuotaToMilliCPU(tc.quota, tc.period); got != tc.milli {
			t.Errorf("QuotaToMilliCPU(%d, %d) = %d, want %d", tc.quota, tc.period, got, tc.milli)
		}
	}
	for weight, shares := range map[uint64]uint64{0: 2, 1: 2, 4: 80, 39: 998, 10000: 262144} {
		if got := WeightToCPUShares(weight); got != shares {
			t.Errorf("WeightToCPUShares(%d) = %d, want %d", weight, got, shares)
		}
	}
	for _, tc := range []struct {
		shares uint64
		milli  int64
		want   bool
	}{
		{81, 80, true},   // v1: as written
		{80, 80, true},   // v2: 81 shares -> weight 4 -> 80 shares
		{102, 80, false}, // another request's
		{2, 0, true},
	} {
		if got := SharesHoldRequest(tc.shares, tc.milli); got != tc.want {
			t.Errorf("SharesHoldRequest(%d, %dm) = %v, want %v", tc.shares, tc.milli, got, tc.want)
		}
	}
}

// TestMilliCPUConversionsPeriods: the values the runtime manager gives
// containers (cpu_shares, cpu_quota) for other periods too.
func TestMilliCPUConversionsPeriods(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc          string
		milli, period int64
		shares        uint64
		quota         int64
	}{
		{desc: "zero", milli: 0, period: 100000, shares: 2, quota: 0},
		{desc: "1m", milli: 1, period: 100000, shares: 2, quota: 1000},
		{desc: "10m", milli: 10, period: 100000, shares: 10, quota: 1000},
		{desc: "100m", milli: 100, period: 100000, shares: 102, quota: 10000},
		{desc: "1 cpu", milli: 1000, period: 100000, shares: 1024, quota: 100000},
		{desc: "1.5 cpu, 50ms period", milli: 1500, period: 50000, shares: 1536, quota: 75000},
		{desc: "huge", milli: 1000000, period: 100000, shares: 262144, quota: 100000000},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := MilliCPUToShares(tc.milli); got != tc.shares {
				t.Errorf("MilliCPUToShares(%d) = %d, want %d", tc.milli, got, tc.shares)
			}
			if got := MilliCPUToQuota(tc.milli, tc.period); got != tc.quota {
				t.Errorf("MilliCPUToQuota(%d, %d) = %d, want %d", tc.milli, tc.period, got, tc.quota)
			}
		})
	}
}
