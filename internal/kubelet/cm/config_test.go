package cm

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

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

func ctr(req, lim map[v1.ResourceName]string) v1.Container {
	c := v1.Container{Name: "c"}
	if req != nil {
		c.Resources.Requests = v1.ResourceList{}
		for k, v := range req {
			c.Resources.Requests[k] = resource.MustParse(v)
		}
	}
	if lim != nil {
		c.Resources.Limits = v1.ResourceList{}
		for k, v := range lim {
			c.Resources.Limits[k] = resource.MustParse(v)
		}
	}
	return c
}

func u64(v uint64) *uint64 { return &v }
func i64(v int64) *int64   { return &v }

func TestResourceConfigForPod(t *testing.T) {
	t.Parallel()
	cpu, mem := v1.ResourceCPU, v1.ResourceMemory
	on := PodConfig{EnforceCPULimits: true, CPUPeriod: 100 * time.Millisecond}
	for _, tc := range []struct {
		desc string
		pod  v1.PodSpec
		cfg  PodConfig
		want ResourceConfig
	}{
		{desc: "besteffort", pod: v1.PodSpec{Containers: []v1.Container{ctr(nil, nil)}}, cfg: on,
			want: ResourceConfig{CPUShares: u64(2)}},
		{desc: "guaranteed", pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "500m", mem: "64Mi"}, map[v1.ResourceName]string{cpu: "500m", mem: "64Mi"})}}, cfg: on,
			want: ResourceConfig{CPUShares: u64(512), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(64 << 20)}},
		{desc: "guaranteed, quota off", pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "1", mem: "1Gi"}, map[v1.ResourceName]string{cpu: "1", mem: "1Gi"})}},
			cfg:  PodConfig{EnforceCPULimits: false},
			want: ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(-1), CPUPeriod: u64(100000), Memory: i64(1 << 30)}},
		{desc: "guaranteed, 50ms period", pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "1", mem: "1Gi"}, map[v1.ResourceName]string{cpu: "1", mem: "1Gi"})}},
			cfg:  PodConfig{EnforceCPULimits: true, CPUPeriod: 50 * time.Millisecond},
			want: ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(50000), CPUPeriod: u64(50000), Memory: i64(1 << 30)}},
		{desc: "burstable, requests only", pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "100m"}, nil), ctr(map[v1.ResourceName]string{cpu: "150m", mem: "10Mi"}, nil)}}, cfg: on,
			want: ResourceConfig{CPUShares: u64(256)}},
		{desc: "burstable, one container without limits: no quota, no memory limit",
			pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "1", mem: "100Mi"}, map[v1.ResourceName]string{cpu: "1", mem: "100Mi"}), ctr(map[v1.ResourceName]string{cpu: "100m"}, nil)}}, cfg: on,
			want: ResourceConfig{CPUShares: u64(1126)}},
		{desc: "burstable, every container limited", pod: v1.PodSpec{Containers: []v1.Container{
			ctr(map[v1.ResourceName]string{cpu: "100m", mem: "10Mi"}, map[v1.ResourceName]string{cpu: "200m", mem: "20Mi"}),
			ctr(map[v1.ResourceName]string{cpu: "100m"}, map[v1.ResourceName]string{cpu: "300m", mem: "30Mi"})}}, cfg: on,
			want: ResourceConfig{CPUShares: u64(204), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(50 << 20)}},
		{desc: "init container larger than the sum", pod: v1.PodSpec{
			InitContainers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "2"}, nil)},
			Containers:     []v1.Container{ctr(map[v1.ResourceName]string{cpu: "100m"}, nil)}}, cfg: on,
			want: ResourceConfig{CPUShares: u64(2048)}},
		{desc: "overhead added", pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "100m"}, nil)},
			Overhead: v1.ResourceList{cpu: resource.MustParse("50m")}}, cfg: on,
			want: ResourceConfig{CPUShares: u64(153)}},
		{desc: "pod-level resources win", pod: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Requests: v1.ResourceList{cpu: resource.MustParse("1"), mem: resource.MustParse("100Mi")}, Limits: v1.ResourceList{cpu: resource.MustParse("2"), mem: resource.MustParse("200Mi")}},
			Containers: []v1.Container{ctr(nil, nil), ctr(nil, nil)}}, cfg: on,
			want: ResourceConfig{CPUShares: u64(1024), CPUQuota: i64(200000), CPUPeriod: u64(100000), Memory: i64(200 << 20)}},
	} {
		got := ResourceConfigForPod(&v1.Pod{Spec: tc.pod}, tc.cfg)
		if got.String() != tc.want.String() {
			t.Errorf("%s: got %s, want %s", tc.desc, got, &tc.want)
		}
	}
}
