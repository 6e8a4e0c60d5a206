package container

import (
	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// Pod-level resources (spec.resources, PodLevelResources) bound the pod as a
// whole; a container that sets no cpu or memory limit of its own runs under
// the pod's. The runtime manager gives a container these effective limits
// (its CFS quota and memory limit), records them as what it actuated, and
// compares them when it plans an in-place resize, so that resizing only the
// pod's limits resizes (or, by its resizePolicy, restarts) such a container,
// as upstream does (its GetLimits).

// EffectiveResources is what container resources c run with in a pod whose
// pod-level resources are podLevel: c's requests as they are, c's cpu and
// memory limits, or the pod's limit of that resource where c sets none. c is
// not changed.
func EffectiveResources(podLevel *v1.ResourceRequirements, c v1.ResourceRequirements) v1.ResourceRequirements {
	out := *c.DeepCopy()
	if podLevel == nil || len(podLevel.Limits) == 0 {
		return out
	}
	for _, res := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		pod, ok := podLevel.Limits[res]
		if !ok || pod.IsZero() {
			continue
		}
		if own, ok := out.Limits[res]; ok && !own.IsZero() {
			continue
		}
		if out.Limits == nil {
			out.Limits = v1.ResourceList{}
		}
		out.Limits[res] = pod.DeepCopy()
	}
	return out
}

// RemainingPodMemoryRequest is the share of a pod's pod-level memory request
// that none of its containers requests, per container (init containers
// included): what upstream adds to a Burstable container's memory request
// when it computes the container's oom_score_adj. 0 without a pod-level
// memory request.
func RemainingPodMemoryRequest(pod *v1.Pod) int64 {
	if pod.Spec.Resources == nil || !resourcehelper.IsPodLevelRequestsSet(pod) {
		return 0
	}
	podMem := pod.Spec.Resources.Requests.Memory().Value()
	n := int64(len(pod.Spec.Containers) + len(pod.Spec.InitContainers))
	if podMem == 0 || n == 0 {
		return 0
	}
	containers := resourcehelper.AggregateContainerRequests(pod, resourcehelper.PodResourcesOptions{})
	return max(podMem-containers.Memory().Value(), 0) / n
}
