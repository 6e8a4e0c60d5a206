package eviction

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Reason is the status reason of evicted and rejected pods, and the reason of
// their events.
const Reason = "Evicted"

// Upstream's message formats (each ends with ". ").
const (
	nodeLowMessageFmt        = "The node was low on resource: %v. "
	nodeConditionMessageFmt  = "The node had condition: %v. "
	thresholdMetMessageFmt   = "Threshold quantity: %v, available: %v. "
	containerMessageFmt      = "Container %s was using %s, request is %s, has larger consumption of %v. "
	podMessageFmt            = "Pod %s was using %s, request is %s, has larger consumption of %v. "
	containerEphemeralMsgFmt = "Container %s exceeded its local ephemeral storage limit %q. "
	podEphemeralMsgFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	emptyDirMsgFmt           = "Usage of EmptyDir volume %q exceeds the limit %q. "
)

// The annotations of the Evicted event.
const (
	annotationOffendingContainers      = "offending_containers"
	annotationOffendingContainersUsage = "offending_containers_usage"
	annotationOffendingPod             = "offending_pod"
	annotationOffendingPodUsage        = "offending_pod_usage"
	annotationStarvedResource          = "starved_resource"
)

// evictionMessage is upstream's message for a pod evicted because the node
// ran low on res, with the event's annotations: the threshold and what was
// available, then the pod (pod-level memory request) and each container
// (init containers included) using more than it requests.
func evictionMessage(res v1.ResourceName, pod *v1.Pod, stats podStatsFunc, met []Threshold, obs observations) (string, map[string]string) {
	annotations := map[string]string{}
	msg := fmt.Sprintf(nodeLowMessageFmt, res)
	for _, t := range met {
		if signalResource[t.Signal] != res {
			continue
		}
		if o, ok := obs[t.Signal]; ok {
			q := resource.NewQuantity(t.Value(o.capacity), resource.BinarySI)
			if t.Quantity != nil {
				q = t.Quantity
			}
			msg += fmt.Sprintf(thresholdMetMessageFmt, q, o.availableQuantity())
			break
		}
	}
	ps, ok := stats(pod)
	if !ok {
		return msg, annotations
	}
	if res == v1.ResourceMemory && resourcehelper.IsPodLevelResourcesSet(pod) && ps.Memory != nil && ps.Memory.WorkingSetBytes != nil {
		if req, ok := pod.Spec.Resources.Requests[res]; ok {
			usage := resource.NewQuantity(int64(*ps.Memory.WorkingSetBytes), resource.BinarySI).String()
			msg += fmt.Sprintf(podMessageFmt, pod.Name, usage, req.String(), res)
			annotations[annotationOffendingPod], annotations[annotationOffendingPodUsage] = pod.Name, usage
		}
	}
	containers := append(append([]v1.Container{}, pod.Spec.Containers...), pod.Spec.InitContainers...)
	var names, usages []string
	for _, cs := range ps.Containers {
		for _, c := range containers {
			if c.Name != cs.Name {
				continue
			}
			req := c.Resources.Requests[res]
			if usage := containerUsage(res, cs); usage != nil && usage.Cmp(req) > 0 {
				msg += fmt.Sprintf(containerMessageFmt, c.Name, usage.String(), req.String(), res)
				names, usages = append(names, c.Name), append(usages, usage.String())
			}
			break
		}
	}
	annotations[annotationOffendingContainers] = strings.Join(names, ",")
	annotations[annotationOffendingContainersUsage] = strings.Join(usages, ",")
	annotations[annotationStarvedResource] = string(res)
	return msg, annotations
}

// containerUsage is what a container uses of res for the message: its
// working set, or its writable layer plus logs; nil when unknown.
func containerUsage(res v1.ResourceName, cs statsapi.ContainerStats) *resource.Quantity {
	switch res {
	case v1.ResourceMemory:
		if cs.Memory != nil && cs.Memory.WorkingSetBytes != nil {
			return resource.NewQuantity(int64(*cs.Memory.WorkingSetBytes), resource.BinarySI)
		}
	case v1.ResourceEphemeralStorage:
		if cs.Rootfs != nil && cs.Rootfs.UsedBytes != nil && cs.Logs != nil && cs.Logs.UsedBytes != nil {
			return resource.NewQuantity(int64(*cs.Rootfs.UsedBytes+*cs.Logs.UsedBytes), resource.BinarySI)
		}
	}
	return nil
}
