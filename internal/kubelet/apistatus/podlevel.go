package apistatus

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// PodCgroupReader reads a pod's cgroup (cm.Manager): its cpu shares, CFS
// quota and period, and memory limit (-1: none); nothing is set when the
// kubelet manages no pod cgroups.
type PodCgroupReader interface {
	PodCgroupResources(pod *v1.Pod) (kubecontainer.PodCgroupResources, error)
}

// minMilliCPULimit is the smallest cpu limit the kernel enforces as given
// (upstream's MinMilliCPULimit): below it a limit read back says nothing of
// the allocation.
const minMilliCPULimit = 10

// setPodLevelResources fills the pod's own allocatedResources and resources
// (upstream's, with InPlacePodLevelResourcesVerticalScaling): the requests of
// the allocated pod (pod-level ones where set, else its containers'), and
// the resources its cgroup applies (podResourcesStatus). A pod cgroup that
// cannot be read leaves the previous values.
func (g *Generator) setPodLevelResources(pod *v1.Pod, s, old *v1.PodStatus) {
	if g.podCgroups == nil {
		return
	}
	s.AllocatedResources = resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	var applied kubecontainer.PodCgroupResources
	if pod.Status.Phase == v1.PodRunning {
		applied, _ = g.podCgroups.PodCgroupResources(pod)
	}
	s.Resources = podResourcesStatus(pod, applied, old)
}

// podResourcesStatus is the pod's status.resources (upstream's
// convertToAPIPodLevelResourcesStatus). A pod not yet Running reports what it
// is allocated: its pod-level resources, with the pod's requests and limits.
// A Running pod reports its pod-level resources as its cgroup applies them:
//   - the cpu request its cpu.shares stand for, unless they are what the
//     allocated request writes (read back, with cgroup v2's loss), or both
//     are at the minimum shares;
//   - the memory request allocated (cgroups hold none), the pod's when no
//     pod-level one is set;
//   - the cpu limit its CFS quota stands for, unless both are below the
//     smallest enforced limit; the memory limit of the cgroup.
//
// A value the cgroup does not give (no limit, nothing read) keeps the one of
// the previous status of the running pod.
func podResourcesStatus(pod *v1.Pod, applied kubecontainer.PodCgroupResources, old *v1.PodStatus) *v1.ResourceRequirements {
	out := &v1.ResourceRequirements{}
	if pod.Spec.Resources != nil {
		out = pod.Spec.Resources.DeepCopy()
	}
	opts := resourcehelper.PodResourcesOptions{}
	if pod.Status.Phase != v1.PodRunning {
		out.Requests = resourcehelper.PodRequests(pod, opts)
		out.Limits = resourcehelper.PodLimits(pod, opts)
		return out
	}
	if out.Requests == nil {
		out.Requests = v1.ResourceList{}
	}
	if out.Limits == nil {
		out.Limits = v1.ResourceList{}
	}
	var prev v1.ResourceRequirements
	if old.Phase == v1.PodRunning && old.Resources != nil {
		prev = *old.Resources
	}
	keepPrevious := func(dst, src v1.ResourceList, res v1.ResourceName) {
		if q, ok := src[res]; ok {
			dst[res] = q.DeepCopy()
		}
	}

	allocatedCPU := out.Requests.Cpu().MilliValue()
	var cpuRequest int64
	if applied.CPUShares != nil {
		cpuRequest = cgroups.SharesToMilliCPU(*applied.CPUShares)
	}
	switch {
	case cpuRequest == 0:
		keepPrevious(out.Requests, prev.Requests, v1.ResourceCPU)
	case (cpuRequest > cgroups.MinShares || allocatedCPU > cgroups.MinShares) && !cgroups.SharesHoldRequest(*applied.CPUShares, allocatedCPU):
		out.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(cpuRequest, resource.DecimalSI)
	}
	if _, ok := out.Requests[v1.ResourceMemory]; !ok {
		keepPrevious(out.Requests, resourcehelper.PodRequests(pod, opts), v1.ResourceMemory)
	}

	var cpuLimit int64
	if applied.CPUQuota != nil && applied.CPUPeriod != nil {
		cpuLimit = cgroups.QuotaToMilliCPU(*applied.CPUQuota, *applied.CPUPeriod)
	}
	switch {
	case cpuLimit <= 0:
		keepPrevious(out.Limits, prev.Limits, v1.ResourceCPU)
	case cpuLimit > minMilliCPULimit || out.Limits.Cpu().MilliValue() > minMilliCPULimit:
		out.Limits[v1.ResourceCPU] = *resource.NewMilliQuantity(cpuLimit, resource.DecimalSI)
	}
	if applied.Memory != nil && *applied.Memory > 0 {
		out.Limits[v1.ResourceMemory] = *resource.NewQuantity(*applied.Memory, resource.BinarySI)
	} else {
		keepPrevious(out.Limits, prev.Limits, v1.ResourceMemory)
	}
	return out
}
