package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// OOM and priority constants of the upstream kubelet (pkg/kubelet/qos); the CPU
// ones are internal/cgroups'.
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000

	// systemCriticalPriority is the lowest priority of the system-*-critical classes.
	systemCriticalPriority  = 2000000000
	systemNodeCriticalClass = "system-node-critical"
)

// GetContainerOOMScoreAdjust returns the oom_score_adj for a container of the pod, per
// the upstream policy: node-critical pods and Guaranteed pods get -997, BestEffort
// pods 1000, and Burstable containers 1000 - 1000*memoryRequest/machineMemory clamped
// to [3, 999] (above any Guaranteed process, below BestEffort ones). A container's
// memoryRequest includes its share of the pod-level memory request its pod's
// containers leave unrequested (kubecontainer.RemainingPodMemoryRequest); a
// sidecar's is at least the smallest of the regular containers', so that it is
// not killed before them.
func GetContainerOOMScoreAdjust(pod *v1.Pod, container *v1.Container, machineMemory int64) int {
	if isNodeCriticalPod(pod) {
		return guaranteedOOMScoreAdj
	}
	switch kubecontainer.GetPodQOS(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj
	case v1.PodQOSBestEffort:
		return besteffortOOMScoreAdj
	}
	if machineMemory <= 0 {
		return besteffortOOMScoreAdj - 1
	}
	remaining := kubecontainer.RemainingPodMemoryRequest(pod)
	memoryRequest := container.Resources.Requests.Memory().Value() + remaining
	if isSidecarOf(pod, container) && len(pod.Spec.Containers) > 0 {
		memoryRequest = max(memoryRequest, minRegularMemoryRequest(pod)+remaining)
	}
	adj := 1000 - (1000*memoryRequest)/machineMemory
	// A Guaranteed process using all of the machine's memory scores about 3 (1000-997);
	// keep Burstable containers above that.
	if adj < 1000+guaranteedOOMScoreAdj {
		return 1000 + guaranteedOOMScoreAdj
	}
	// Give Burstable containers a better chance than BestEffort ones.
	if adj >= besteffortOOMScoreAdj {
		return besteffortOOMScoreAdj - 1
	}
	return int(adj)
}

// isSidecarOf reports whether c is one of the pod's sidecars (an init
// container with restartPolicy Always).
func isSidecarOf(pod *v1.Pod, c *v1.Container) bool {
	if !kubecontainer.IsSidecar(c) {
		return false
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == c.Name {
			return true
		}
	}
	return false
}

// minRegularMemoryRequest is the smallest memory request of the pod's regular
// containers.
func minRegularMemoryRequest(pod *v1.Pod) int64 {
	least := pod.Spec.Containers[0].Resources.Requests.Memory().Value()
	for _, c := range pod.Spec.Containers[1:] {
		least = min(least, c.Resources.Requests.Memory().Value())
	}
	return least
}

// isNodeCriticalPod reports whether the pod is critical (static, mirror, or of system
// critical priority) and of the system-node-critical priority class.
func isNodeCriticalPod(pod *v1.Pod) bool {
	if pod.Spec.PriorityClassName != systemNodeCriticalClass {
		return false
	}
	if kubecontainer.IsStaticPod(pod) {
		return true
	}
	if _, ok := pod.Annotations[kubecontainer.ConfigMirrorAnnotationKey]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// milliValue returns q in milli-units, or 0 for a nil quantity.
func milliValue(q *resource.Quantity) int64 {
	if q == nil {
		return 0
	}
	return q.MilliValue()
}
