package cm

import (
	"time"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// PodConfig holds the settings ResourceConfigForPod depends on.
type PodConfig struct {
	// EnforceCPULimits is --cpu-cfs-quota: without it the quota is -1.
	EnforceCPULimits bool
	// CPUPeriod is --cpu-cfs-quota-period (default 100ms).
	CPUPeriod time.Duration
}

// ResourceConfigForPod is the pod cgroup's configuration, as upstream
// computes it: requests and limits of the pod (pod-level spec.resources when
// set, else the containers', init containers and sidecars included, plus the
// overhead); cpu.shares from the cpu request; the CFS quota from the cpu limit
// when every container has one (or the pod-level limit is set); the memory
// limit likewise; a BestEffort pod gets the minimum shares only.
func ResourceConfigForPod(pod *v1.Pod, c PodConfig) *cgroups.Resources {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	cpuReq, cpuLim := reqs.Cpu().MilliValue(), limits.Cpu().MilliValue()
	memLim := limits.Memory().Value()

	cpuDeclared, memDeclared := true, true
	check := func(cs []v1.Container) {
		for i := range cs {
			if cs[i].Resources.Limits.Cpu().IsZero() {
				cpuDeclared = false
			}
			if cs[i].Resources.Limits.Memory().IsZero() {
				memDeclared = false
			}
		}
	}
	check(pod.Spec.InitContainers)
	check(pod.Spec.Containers)
	if pl := pod.Spec.Resources; pl != nil && resourcehelper.IsPodLevelResourcesSet(pod) {
		if !pl.Limits.Cpu().IsZero() {
			cpuDeclared = true
		}
		if !pl.Limits.Memory().IsZero() {
			memDeclared = true
		}
	}

	period := uint64(cgroups.QuotaPeriod)
	if c.CPUPeriod > 0 {
		period = uint64(c.CPUPeriod / time.Microsecond)
	}
	shares := cgroups.MilliCPUToShares(cpuReq)
	quota := cgroups.MilliCPUToQuota(cpuLim, int64(period))
	if !c.EnforceCPULimits {
		quota = -1
	}
	rc := &cgroups.Resources{}
	switch kubecontainer.GetPodQOS(pod) {
	case v1.PodQOSGuaranteed:
		rc.CPUShares, rc.CPUQuota, rc.CPUPeriod, rc.Memory = &shares, &quota, &period, &memLim
	case v1.PodQOSBurstable:
		rc.CPUShares = &shares
		if cpuDeclared {
			rc.CPUQuota, rc.CPUPeriod = &quota, &period
		}
		if memDeclared {
			rc.Memory = &memLim
		}
	default:
		minShares := uint64(cgroups.MinShares)
		rc.CPUShares = &minShares
	}
	return rc
}
