package status

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// maxPodTerminationMessageLength is the budget of all termination messages of
// a pod together (upstream's MaxPodTerminationMessageLogLength); each
// container gets an equal share.
const maxPodTerminationMessageLength = 1024 * 12

// kubeletConditions are the pod conditions the kubelet owns: its value
// replaces the API's, and an owned condition the kubelet no longer reports is
// removed. PodScheduled is owned too, but the scheduler's True record is kept
// (see mergeConditions).
var kubeletConditions = map[v1.PodConditionType]bool{
	v1.PodScheduled:              true,
	v1.PodReady:                  true,
	v1.PodInitialized:            true,
	v1.ContainersReady:           true,
	v1.PodReadyToStartContainers: true,
	v1.PodResizePending:          true,
	v1.PodResizeInProgress:       true,
}

// mergePodStatus returns the status to write over api (the API server's copy)
// given local (the kubelet's). It never changes api. The result:
//   - keeps the conditions the kubelet does not own (readiness gates, the
//     scheduler's PodScheduled, DisruptionTarget...) and their order, takes the
//     owned ones from local, and keeps the API's transition time of a condition
//     whose status did not change;
//   - never goes backwards: a terminal API phase stays (with its reason and
//     message), restart counts never drop, a container the API reports
//     terminated is not reported running again when that is impossible (same
//     container, or a restart policy that does not restart it), the start time,
//     IPs, QoS class and observed generation are kept when local has none;
//   - keeps the fields others own (nominatedNodeName, resource claims, resize);
//   - reports Ready and ContainersReady False once the phase is terminal
//     (transition time now);
//   - holds back a terminal phase (with its reason and message) while the
//     pod may still have running containers (mayBeRunning), as upstream: a
//     pod is never reported terminal while it still holds the node's
//     resources. Its DisruptionTarget condition is sent already.
func mergePodStatus(pod *v1.Pod, api, local v1.PodStatus, now metav1.Time, mayBeRunning bool, rules kubecontainer.RestartRules) v1.PodStatus {
	out := *local.DeepCopy()
	api = *api.DeepCopy()
	transitioningToTerminal := !IsTerminal(api.Phase) && IsTerminal(out.Phase)
	if IsTerminal(api.Phase) && out.Phase != api.Phase {
		out.Phase, out.Reason, out.Message = api.Phase, api.Reason, api.Message
	}
	if transitioningToTerminal && mayBeRunning {
		out.Phase, out.Reason, out.Message = api.Phase, api.Reason, api.Message
	}
	out.Conditions = mergeConditions(api.Conditions, local.Conditions, transitioningToTerminal, !rules.NoRestartAll)
	keepOwnedByOthers(&out, &api)
	keepIfUnset(&out, &api)
	out.InitContainerStatuses = mergeContainerStatuses(pod, api.InitContainerStatuses, out.InitContainerStatuses, true, rules)
	out.ContainerStatuses = mergeContainerStatuses(pod, api.ContainerStatuses, out.ContainerStatuses, false, rules)
	out.EphemeralContainerStatuses = mergeContainerStatuses(pod, api.EphemeralContainerStatuses, out.EphemeralContainerStatuses, false, rules)
	truncateTerminationMessages(pod, &out)
	if IsTerminal(out.Phase) {
		notReadyWhenTerminal(&out, api.Conditions, now)
	}
	return out
}

// notReadyWhenTerminal turns a True Ready or ContainersReady into False
// (reason PodCompleted or PodFailed): the kubelet's readiness may lag behind a
// terminal phase, and a terminal pod must never look ready (kubernetes#108594).
func notReadyWhenTerminal(s *v1.PodStatus, api []v1.PodCondition, now metav1.Time) {
	reason := PodFailed
	if s.Phase == v1.PodSucceeded {
		reason = PodCompleted
	}
	for i := range s.Conditions {
		c := &s.Conditions[i]
		if (c.Type != v1.PodReady && c.Type != v1.ContainersReady) || c.Status != v1.ConditionTrue {
			continue
		}
		c.Status, c.Reason, c.Message, c.LastTransitionTime = v1.ConditionFalse, reason, "", now
		if prev := findCondition(api, c.Type); prev != nil && prev.Status == v1.ConditionFalse {
			c.LastTransitionTime = prev.LastTransitionTime
		}
	}
}

// mergeConditions keeps api's order: API conditions not owned by the kubelet
// stay as they are, owned ones are replaced by local's (or dropped when local
// has none), and local's owned conditions the API lacks are appended. local's
// DisruptionTarget (shared with the eviction machinery) is sent only with the
// transition to a terminal phase, as upstream does. AllContainersRestarting
// is owned with its gate on (restartAll).
func mergeConditions(api, local []v1.PodCondition, transitioningToTerminal, restartAll bool) []v1.PodCondition {
	kubeletOwned := func(t v1.PodConditionType) bool {
		return kubeletConditions[t] || (restartAll && t == v1.AllContainersRestarting)
	}
	owned := func(c v1.PodCondition) bool {
		if c.Type == v1.DisruptionTarget {
			return transitioningToTerminal
		}
		return kubeletOwned(c.Type)
	}
	wanted := map[v1.PodConditionType]v1.PodCondition{}
	for _, c := range local {
		if owned(c) {
			wanted[c.Type] = c
		}
	}
	out := make([]v1.PodCondition, 0, len(api)+len(wanted))
	seen := map[v1.PodConditionType]bool{}
	for _, a := range api {
		seen[a.Type] = true
		l, ok := wanted[a.Type]
		switch {
		case a.Type == v1.PodScheduled && a.Status == v1.ConditionTrue:
			out = append(out, a) // the scheduler's record of binding the pod
		case ok:
			if l.Status == a.Status {
				l.LastTransitionTime = a.LastTransitionTime
			}
			out = append(out, l)
		case !kubeletOwned(a.Type):
			out = append(out, a)
		}
	}
	for _, l := range local {
		if owned(l) && !seen[l.Type] {
			seen[l.Type] = true
			out = append(out, l)
		}
	}
	return out
}

// keepOwnedByOthers copies the fields the scheduler and the resource-claim
// controllers write.
func keepOwnedByOthers(out, api *v1.PodStatus) {
	out.NominatedNodeName = api.NominatedNodeName
	out.ResourceClaimStatuses = api.ResourceClaimStatuses
	out.ExtendedResourceClaimStatus = api.ExtendedResourceClaimStatus
	if out.Resize == "" {
		out.Resize = api.Resize
	}
	if len(out.NodeAllocatableResourceClaimStatuses) == 0 {
		out.NodeAllocatableResourceClaimStatuses = api.NodeAllocatableResourceClaimStatuses
	}
}

// keepIfUnset fills the fields local leaves empty from api, and keeps the
// API's start time and observed generation from moving backwards.
func keepIfUnset(out, api *v1.PodStatus) {
	if api.StartTime != nil && !api.StartTime.IsZero() {
		out.StartTime = api.StartTime
	}
	if out.ObservedGeneration < api.ObservedGeneration {
		out.ObservedGeneration = api.ObservedGeneration
	}
	if out.QOSClass == "" {
		out.QOSClass = api.QOSClass
	}
	if out.HostIP == "" && len(out.HostIPs) == 0 {
		out.HostIP, out.HostIPs = api.HostIP, api.HostIPs
	}
	if out.PodIP == "" && len(out.PodIPs) == 0 {
		out.PodIP, out.PodIPs = api.PodIP, api.PodIPs
	}
	if out.AllocatedResources == nil {
		out.AllocatedResources = api.AllocatedResources
	}
	if out.Resources == nil {
		out.Resources = api.Resources
	}
}

// mergeContainerStatuses returns local's statuses with the API's kept where
// local would go backwards. An API list with local reporting nothing is kept.
func mergeContainerStatuses(pod *v1.Pod, api, local []v1.ContainerStatus, init bool, rules kubecontainer.RestartRules) []v1.ContainerStatus {
	if len(local) == 0 {
		return api
	}
	for i := range local {
		l := &local[i]
		a := findByName(api, l.Name)
		if a == nil {
			continue
		}
		if a.State.Terminated != nil && l.State.Terminated == nil && !removedForRestartAll(l, rules) {
			sameContainer := a.ContainerID != "" && a.ContainerID == l.ContainerID
			if sameContainer || !mayRestart(pod, l.Name, init, a.State.Terminated.ExitCode, rules) {
				*l = *a
				continue
			}
		}
		if l.RestartCount < a.RestartCount {
			l.RestartCount = a.RestartCount
		}
	}
	return local
}

// removedForRestartAll reports whether s is the status of a container removed
// to restart its pod in place (waiting with reason RestartingAllContainers,
// still naming the removed container): it replaces the API's terminated
// state of that container, as upstream reports it.
func removedForRestartAll(s *v1.ContainerStatus, rules kubecontainer.RestartRules) bool {
	return !rules.NoRestartAll && s.State.Waiting != nil && s.State.Waiting.Reason == ReasonRestartingAllContainers
}

// mayRestart reports whether a container that exited with code can run again
// under the pod's or its own restart policy and rules; every container of a
// pod with a RestartAllContainers rule may. A container the spec
// does not name (an ephemeral one) follows the pod's policy.
func mayRestart(pod *v1.Pod, name string, init bool, code int32, rules kubecontainer.RestartRules) bool {
	if pod == nil || pod.Spec.RestartPolicy == v1.RestartPolicyAlways {
		return true
	}
	if !rules.NoRestartAll && kubecontainer.AllContainersCouldRestart(&pod.Spec) {
		return true
	}
	containers := pod.Spec.Containers
	if init {
		if isRestartableInit(&pod.Spec, name) {
			return true
		}
		containers = pod.Spec.InitContainers
	}
	c := &v1.Container{Name: name}
	for i := range containers {
		if containers[i].Name == name {
			c = &containers[i]
		}
	}
	return rules.ShouldRestart(c, &pod.Spec, code)
}

// truncateTerminationMessages keeps every termination message within its
// share of the pod's budget (the API server refuses larger ones).
func truncateTerminationMessages(pod *v1.Pod, s *v1.PodStatus) {
	limit := maxPodTerminationMessageLength
	if pod != nil {
		if n := len(pod.Spec.Containers) + len(pod.Spec.InitContainers); n > 0 {
			limit /= n
		}
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses, s.EphemeralContainerStatuses} {
		for i := range list {
			for _, st := range []*v1.ContainerState{&list[i].State, &list[i].LastTerminationState} {
				if t := st.Terminated; t != nil && len(t.Message) > limit {
					t.Message = t.Message[:limit]
				}
			}
		}
	}
}

// statusPatch returns the strategic merge patch that turns old into cur, with
// the pod's UID in the patch's metadata: the API server refuses it (409) when
// the object it lands on has another UID. unchanged is true when the patch
// carries nothing but that precondition.
func statusPatch(uid k8stypes.UID, old, cur v1.PodStatus) (patch []byte, unchanged bool, err error) {
	oldData, err := json.Marshal(v1.Pod{Status: old})
	if err != nil {
		return nil, false, fmt.Errorf("encode old status: %w", err)
	}
	curData, err := json.Marshal(v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: cur})
	if err != nil {
		return nil, false, fmt.Errorf("encode new status: %w", err)
	}
	patch, err = strategicpatch.CreateTwoWayMergePatch(oldData, curData, v1.Pod{})
	if err != nil {
		return nil, false, fmt.Errorf("create status patch: %w", err)
	}
	return patch, bytes.Equal(patch, fmt.Appendf(nil, `{"metadata":{"uid":%q}}`, uid)), nil
}

// patchPodStatus patches pod's status subresource from old to cur. It sends
// nothing and returns (nil, true, nil) when there is no difference.
func patchPodStatus(ctx context.Context, client kubernetes.Interface, pod *v1.Pod, cur v1.PodStatus) (*v1.Pod, bool, error) {
	patch, unchanged, err := statusPatch(pod.UID, pod.Status, cur)
	if err != nil || unchanged {
		return nil, unchanged, err
	}
	updated, err := client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, k8stypes.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, false, fmt.Errorf("patch status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return updated, false, nil
}
