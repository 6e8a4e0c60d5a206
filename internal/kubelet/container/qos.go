package container

import (
	v1 "k8s.io/api/core/v1"
)

// GetPodQOS returns the pod's QoS class: the one in its status when set,
// otherwise ComputePodQOS.
func GetPodQOS(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputePodQOS(pod)
}

// ComputePodQOS computes the pod's QoS class from its cpu and memory requests
// and limits: the pod-level ones (spec.resources) when set, as upstream 1.37
// does with PodLevelResources on, else its containers' and init containers':
//   - BestEffort: no request or limit of cpu or memory;
//   - Guaranteed: cpu and memory limited (every container, or the pod), and
//     the requests equal the limits for both;
//   - Burstable: everything else.
func ComputePodQOS(pod *v1.Pod) v1.PodQOSClass {
	requests := v1.ResourceList{}
	limits := v1.ResourceList{}
	guaranteed := true
	if pl := pod.Spec.Resources; pl != nil && (len(qosResources(pl.Requests)) > 0 || len(qosResources(pl.Limits)) > 0) {
		addQOSQuantities(requests, pl.Requests)
		found := addQOSQuantities(limits, pl.Limits)
		guaranteed = found[v1.ResourceCPU] && found[v1.ResourceMemory]
	} else {
		all := make([]v1.Container, 0, len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
		all = append(all, pod.Spec.Containers...)
		all = append(all, pod.Spec.InitContainers...)
		for i := range all {
			addQOSQuantities(requests, all[i].Resources.Requests)
			found := addQOSQuantities(limits, all[i].Resources.Limits)
			if !found[v1.ResourceCPU] || !found[v1.ResourceMemory] {
				guaranteed = false
			}
		}
	}
	if len(requests) == 0 && len(limits) == 0 {
		return v1.PodQOSBestEffort
	}
	if guaranteed {
		for name, req := range requests {
			if lim, ok := limits[name]; !ok || lim.Cmp(req) != 0 {
				guaranteed = false
				break
			}
		}
	}
	if guaranteed && len(requests) == len(limits) {
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// qosResources returns the positive cpu and memory quantities of l.
func qosResources(l v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	addQOSQuantities(out, l)
	return out
}

// addQOSQuantities adds the positive cpu and memory quantities of in to sum and
// reports which of them were present.
func addQOSQuantities(sum, in v1.ResourceList) map[v1.ResourceName]bool {
	found := map[v1.ResourceName]bool{}
	for name, q := range in {
		if name != v1.ResourceCPU && name != v1.ResourceMemory {
			continue
		}
		if q.Sign() <= 0 {
			continue
		}
		found[name] = true
		total := q.DeepCopy()
		if prev, ok := sum[name]; ok {
			total.Add(prev)
		}
		sum[name] = total
	}
	return found
}
