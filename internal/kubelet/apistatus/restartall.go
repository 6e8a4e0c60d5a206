package apistatus

import (
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
)

// ReasonRestartingAllContainers is upstream's reason of the waiting state and
// last termination of a container removed to restart its pod in place
// (RestartAllContainers).
const ReasonRestartingAllContainers = status.ReasonRestartingAllContainers

// removedForRestartAllMessage is upstream's message for such a container.
const removedForRestartAllMessage = "The container is removed because RestartAllContainers in place"

// convertContext is what converting a pod's container statuses needs beside
// the containers themselves.
type convertContext struct {
	pod *v1.Pod
	ps  *kubecontainer.PodStatus
	// hasInit: the pod has init containers (the default waiting reason is
	// PodInitializing).
	hasInit bool
	// restartAll: the RestartAllContainersOnContainerExits gate is on.
	restartAll bool
	// restarting: the pod is restarting all its containers
	// (RestartRules.ShouldAllContainersRestart).
	restarting bool
}

// markRemovedForRestartAll makes st, the status of a container removed so
// that its pod restarts all its containers, waiting with reason
// RestartingAllContainers, a last termination saying so (exit 137) and one
// more restart than old, its previous status.
func markRemovedForRestartAll(st *v1.ContainerStatus, old *v1.ContainerStatus) {
	st.State.Waiting = &v1.ContainerStateWaiting{Reason: ReasonRestartingAllContainers, Message: removedForRestartAllMessage}
	st.State.Terminated = nil
	st.LastTerminationState.Terminated = &v1.ContainerStateTerminated{
		Reason:   ReasonRestartingAllContainers,
		Message:  removedForRestartAllMessage,
		ExitCode: 137,
	}
	st.RestartCount = old.RestartCount + 1
}

// carryOverForRestartAll keeps, in st (converted from the runtime), the
// restart count of old (the previous status) when higher, and its
// termination as the last state: the termination of a container whose
// instance was replaced (old terminated), else old's last termination. A
// container removed to restart its pod left no runtime status to take them
// from.
func carryOverForRestartAll(st, old *v1.ContainerStatus) {
	if old.RestartCount > st.RestartCount {
		st.RestartCount = old.RestartCount
	}
	switch {
	case old.ContainerID != st.ContainerID && old.State.Terminated != nil:
		st.LastTerminationState.Terminated = old.State.Terminated
	case old.LastTerminationState.Terminated != nil:
		st.LastTerminationState.Terminated = old.LastTerminationState.Terminated
	}
}
