package admission

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// ReasonFeatureUnsupported is upstream's rejection reason for a pod that
// needs a node feature the node does not declare.
const ReasonFeatureUnsupported = "PodFeatureUnsupported"

// featureRestartAllContainers is the node-declared feature a pod with a
// RestartAllContainers restart rule needs (upstream's
// RestartAllContainersOnContainerExits). This kubelet does not carry that
// action out, so it does not declare the feature.
const featureRestartAllContainers = "RestartAllContainersOnContainerExits"

// DeclaredFeatures rejects, with upstream's reason and message, a pod that
// needs a node feature this kubelet lacks, as upstream's declared features
// admit handler does on a node that does not declare it.
func DeclaredFeatures(pod *v1.Pod) (reason, message string, ok bool) {
	if !usesRestartAllContainers(&pod.Spec) {
		return "", "", true
	}
	return ReasonFeatureUnsupported, fmt.Sprintf("Pod requires node features that are not available: %s", featureRestartAllContainers), false
}

func usesRestartAllContainers(spec *v1.PodSpec) bool {
	restartsAll := func(r v1.ContainerRestartRule) bool {
		return r.Action == v1.ContainerRestartRuleActionRestartAllContainers
	}
	for _, list := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if slices.ContainsFunc(list[i].RestartPolicyRules, restartsAll) {
				return true
			}
		}
	}
	return false
}
