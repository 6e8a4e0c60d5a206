package cm

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

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
		want cgroups.Resources
	}{
		{desc: "besteffort", pod: v1.PodSpec{Containers: []v1.Container{ctr(nil, nil)}}, cfg: on,
			want: cgroups.Resources{CPUShares: u64(2)}},
		{desc: "guaranteed", pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "500m", mem: "64Mi"}, map[v1.ResourceName]string{cpu: "500m", mem: "64Mi"})}}, cfg: on,
			want: cgroups.Resources{CPUShares: u64(512), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(64 << 20)}},
		{desc: "guaranteed, quota off", pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "1", mem: "1Gi"}, map[v1.ResourceName]string{cpu: "1", mem: "1Gi"})}},
			cfg:  PodConfig{EnforceCPULimits: false},
			want: cgroups.Resources{CPUShares: u64(1024), CPUQuota: i64(-1), CPUPeriod: u64(100000), Memory: i64(1 << 30)}},
		{desc: "guaranteed, 50ms period", pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "1", mem: "1Gi"}, map[v1.ResourceName]string{cpu: "1", mem: "1Gi"})}},
			cfg:  PodConfig{EnforceCPULimits: true, CPUPeriod: 50 * time.Millisecond},
			want: cgroups.Resources{CPUShares: u64(1024), CPUQuota: i64(50000), CPUPeriod: u64(50000), Memory: i64(1 << 30)}},
		{desc: "burstable, requests only", pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "100m"}, nil), ctr(map[v1.ResourceName]string{cpu: "150m", mem: "10Mi"}, nil)}}, cfg: on,
			want: cgroups.Resources{CPUShares: u64(256)}},
		{desc: "burstable, one container without limits: no quota, no memory limit",
			pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "1", mem: "100Mi"}, map[v1.ResourceName]string{cpu: "1", mem: "100Mi"}), ctr(map[v1.ResourceName]string{cpu: "100m"}, nil)}}, cfg: on,
			want: cgroups.Resources{CPUShares: u64(1126)}},
		{desc: "burstable, every container limited", pod: v1.PodSpec{Containers: []v1.Container{
			ctr(map[v1.ResourceName]string{cpu: "100m", mem: "10Mi"}, map[v1.ResourceName]string{cpu: "200m", mem: "20Mi"}),
			ctr(map[v1.ResourceName]string{cpu: "100m"}, map[v1.ResourceName]string{cpu: "300m", mem: "30Mi"})}}, cfg: on,
			want: cgroups.Resources{CPUShares: u64(204), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(50 << 20)}},
		{desc: "init container larger than the sum", pod: v1.PodSpec{
			InitContainers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "2"}, nil)},
			Containers:     []v1.Container{ctr(map[v1.ResourceName]string{cpu: "100m"}, nil)}}, cfg: on,
			want: cgroups.Resources{CPUShares: u64(2048)}},
		{desc: "overhead added", pod: v1.PodSpec{Containers: []v1.Container{ctr(map[v1.ResourceName]string{cpu: "100m"}, nil)},
			Overhead: v1.ResourceList{cpu: resource.MustParse("50m")}}, cfg: on,
			want: cgroups.Resources{CPUShares: u64(153)}},
		{desc: "pod-level resources win", pod: v1.PodSpec{
			Resources:  &v1.ResourceRequirements{Requests: v1.ResourceList{cpu: resource.MustParse("1"), mem: resource.MustParse("100Mi")}, Limits: v1.ResourceList{cpu: resource.MustParse("2"), mem: resource.MustParse("200Mi")}},
			Containers: []v1.Container{ctr(nil, nil), ctr(nil, nil)}}, cfg: on,
			want: cgroups.Resources{CPUShares: u64(1024), CPUQuota: i64(200000), CPUPeriod: u64(100000), Memory: i64(200 << 20)}},
	} {
		got := ResourceConfigForPod(&v1.Pod{Spec: tc.pod}, tc.cfg)
		if got.String() != tc.want.String() {
			t.Errorf("%s: got %s, want %s", tc.desc, got, &tc.want)
		}
	}
}
