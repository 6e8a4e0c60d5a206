package status

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// Reasons of the kubelet-owned pod conditions (upstream values).
const (
	UnknownContainerStatuses = "UnknownContainerStatuses"
	PodCompleted             = "PodCompleted"
	PodFailed                = "PodFailed"
	ContainersNotReady       = "ContainersNotReady"
	ContainersNotInitialized = "ContainersNotInitialized"
	ReadinessGatesNotReady   = "ReadinessGatesNotReady"
	// RestartAllContainersStarted: a container exited and triggered the
	// RestartAllContainers action.
	RestartAllContainersStarted = "RestartAllContainersStarted"
)

// ReasonRestartingAllContainers is upstream's reason of the waiting state
// and last termination of a container removed to restart its pod in place
// (RestartAllContainers).
const ReasonRestartingAllContainers = "RestartingAllContainers"

// GenerateContainersReadyCondition returns the ContainersReady condition: true when
// every regular container and every sidecar init container is ready.
func GenerateContainersReadyCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionFalse}
	if statuses == nil {
		cond.Reason = UnknownContainerStatuses
		return cond
	}
	var unknown, unready []string
	check := func(c *v1.Container) {
		cs := findByName(statuses, c.Name)
		switch {
		case cs == nil:
			unknown = append(unknown, c.Name)
		case !cs.Ready:
			unready = append(unready, c.Name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if IsRestartableInitContainer(&pod.Spec.InitContainers[i]) {
			check(&pod.Spec.InitContainers[i])
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		cond.Reason = PodCompleted
		return cond
	}
	if phase == v1.PodFailed {
		cond.Reason = PodFailed
		return cond
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(unready) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unready status: %s", unready))
	}
	if len(msgs) > 0 {
		cond.Reason, cond.Message = ContainersNotReady, strings.Join(msgs, ", ")
		return cond
	}
	cond.Status = v1.ConditionTrue
	return cond
}

// GeneratePodReadyCondition returns the Ready condition: ContainersReady plus
// every readiness gate's condition being true.
func GeneratePodReadyCondition(pod *v1.Pod, conditions []v1.PodCondition, statuses []v1.ContainerStatus, phase v1.PodPhase) v1.PodCondition {
	cr := GenerateContainersReadyCondition(pod, statuses, phase)
	if cr.Status != v1.ConditionTrue {
		return v1.PodCondition{Type: v1.PodReady, Status: cr.Status, Reason: cr.Reason, Message: cr.Message}
	}
	var msgs []string
	for _, gate := range pod.Spec.ReadinessGates {
		c := findCondition(conditions, gate.ConditionType)
		switch {
		case c == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gate.ConditionType))
		case c.Status != v1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", gate.ConditionType, c.Status))
		}
	}
	if len(msgs) > 0 {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: ReadinessGatesNotReady,
			Message: strings.Join(msgs, ", ")}
	}
	return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
}

// ReadinessNeedsReconcile reports whether the Ready condition in a pod's API
// status disagrees (in status or message) with the one its readiness gates'
// conditions and container statuses, as the API holds them, call for. Only
// pods with readiness gates and a Ready condition are checked: a controller
// setting a gate's condition changes nothing else the kubelet would act on,
// so such a pod needs a sync of its own (upstream
// NeedToReconcilePodReadiness). The init container statuses count too, so
// that a sidecar's readiness is not taken as unknown.
func ReadinessNeedsReconcile(pod *v1.Pod) bool {
	if len(pod.Spec.ReadinessGates) == 0 {
		return false
	}
	current := findCondition(pod.Status.Conditions, v1.PodReady)
	if current == nil {
		return false
	}
	want := GeneratePodReadyCondition(pod, pod.Status.Conditions, allContainerStatuses(&pod.Status), pod.Status.Phase)
	return current.Status != want.Status || current.Message != want.Message
}

// GeneratePodInitializedCondition returns the Initialized condition: true when
// every regular init container succeeded (is ready) and every sidecar started,
// or once any regular container has started. wasInitialized (the previous
// status says Initialized, and RestartAllContainers is on) keeps it true
// while a pod restarting all its containers runs its init containers again.
func GeneratePodInitializedCondition(pod *v1.Pod, statuses []v1.ContainerStatus, phase v1.PodPhase, wasInitialized bool) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	if statuses == nil && len(pod.Spec.InitContainers) > 0 {
		cond.Status, cond.Reason = v1.ConditionFalse, UnknownContainerStatuses
		return cond
	}
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := findByName(statuses, c.Name)
		switch {
		case cs == nil:
			unknown = append(unknown, c.Name)
		case IsRestartableInitContainer(c) && (cs.Started == nil || !*cs.Started):
			incomplete = append(incomplete, c.Name)
		case !IsRestartableInitContainer(c) && !cs.Ready:
			incomplete = append(incomplete, c.Name)
		}
	}
	if phase == v1.PodSucceeded && len(unknown) == 0 {
		cond.Reason = PodCompleted
		return cond
	}
	if HasAnyRegularContainerStarted(&pod.Spec, statuses) {
		return cond
	}
	var msgs []string
	if len(unknown) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with unknown status: %s", unknown))
	}
	if len(incomplete) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with incomplete status: %s", incomplete))
	}
	if len(msgs) > 0 && !wasInitialized {
		cond.Status, cond.Reason, cond.Message = v1.ConditionFalse, ContainersNotInitialized, strings.Join(msgs, ", ")
	}
	return cond
}

// GenerateAllContainersRestartingCondition returns the AllContainersRestarting
// condition of a pod with a RestartAllContainers rule: True (reason
// RestartAllContainersStarted) from the exit that triggers the action until
// no container of the pod is left in the runtime (ps), False otherwise, and
// False with PodCompleted or PodFailed once the phase is terminal. old is the
// status the kubelet set before.
func GenerateAllContainersRestartingCondition(pod *v1.Pod, ps *kubecontainer.PodStatus, old *v1.PodStatus, phase v1.PodPhase, rules kubecontainer.RestartRules) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.AllContainersRestarting, Status: v1.ConditionFalse}
	switch {
	case phase == v1.PodSucceeded:
		cond.Reason = PodCompleted
	case phase == v1.PodFailed:
		cond.Reason = PodFailed
	case !rules.ShouldAllContainersRestart(pod, ps, old), kubecontainer.AllContainersRestartCleanedUp(pod, ps):
	default:
		cond.Status, cond.Reason, cond.Message = v1.ConditionTrue, RestartAllContainersStarted, "container exited with restart policy rule"
	}
	return cond
}

// HasAnyRegularContainerStarted reports whether any regular container of spec
// is running or has terminated according to statuses.
func HasAnyRegularContainerStarted(spec *v1.PodSpec, statuses []v1.ContainerStatus) bool {
	for i := range spec.Containers {
		cs := findByName(statuses, spec.Containers[i].Name)
		if cs != nil && (cs.State.Running != nil || cs.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// GeneratePodReadyToStartContainersCondition is true when the pod has exactly one
// ready sandbox with the right network mode and, off the host network, an IP.
func GeneratePodReadyToStartContainersCondition(pod *v1.Pod, podStatus *kubecontainer.PodStatus) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionFalse}
	if !SandboxNeedsReplacing(pod, podStatus) {
		cond.Status = v1.ConditionTrue
	}
	return cond
}

// SandboxNeedsReplacing reports whether the kubelet would create a new sandbox for
// the pod: there is none, more than one is ready, the newest is not ready, its
// network mode differs from the spec, or it has no IP off the host network.
func SandboxNeedsReplacing(pod *v1.Pod, podStatus *kubecontainer.PodStatus) bool {
	if podStatus == nil || len(podStatus.SandboxStatuses) == 0 {
		return true
	}
	ready := 0
	for _, s := range podStatus.SandboxStatuses {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
	}
	if ready > 1 {
		return true
	}
	newest := podStatus.SandboxStatuses[0]
	if newest.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return true
	}
	hostNet := newest.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
	if hostNet != pod.Spec.HostNetwork {
		return true
	}
	return !pod.Spec.HostNetwork && newest.GetNetwork().GetIp() == ""
}
