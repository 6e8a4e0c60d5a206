package eviction

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// conditionOrder is the order conditions are named in rejection messages.
var conditionOrder = []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure}

// Admit decides whether the node under pressure takes pod, as upstream's
// eviction admit handler: without pressure, and for critical pods, yes; under
// memory pressure alone, every pod but BestEffort ones that do not tolerate
// the memory-pressure taint; under any other pressure, no pod. A refusal
// returns reason Evicted and upstream's message.
func (m *Manager) Admit(pod *v1.Pod) (reason, message string, ok bool) {
	m.mu.RLock()
	var conds []v1.NodeConditionType
	for _, c := range conditionOrder {
		if m.conditions[c] {
			conds = append(conds, c)
		}
	}
	m.mu.RUnlock()
	if len(conds) == 0 || kubecontainer.IsCriticalPod(pod) {
		return "", "", true
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if kubecontainer.GetPodQOS(pod) != v1.PodQOSBestEffort || toleratesMemoryPressure(pod) {
			return "", "", true
		}
	}
	return Reason, fmt.Sprintf(nodeConditionMessageFmt, conds), false
}

// toleratesMemoryPressure reports whether the pod tolerates the
// node.kubernetes.io/memory-pressure:NoSchedule taint.
func toleratesMemoryPressure(pod *v1.Pod) bool {
	taint := &v1.Taint{Key: v1.TaintNodeMemoryPressure, Effect: v1.TaintEffectNoSchedule}
	for i := range pod.Spec.Tolerations {
		if pod.Spec.Tolerations[i].ToleratesTaint(klog.Background(), taint, false) {
			return true
		}
	}
	return false
}
