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
