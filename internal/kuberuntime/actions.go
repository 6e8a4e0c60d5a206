package kuberuntime

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// containerKillReason says why a container is killed; probe failures may use
// the probe's own termination grace period.
type containerKillReason string

const (
	reasonStartupProbe        containerKillReason = "StartupProbe"
	reasonLivenessProbe       containerKillReason = "LivenessProbe"
	reasonFailedPostStartHook containerKillReason = "FailedPostStartHook"
	// reasonRestartAllContainers: killed to restart the whole pod in place.
	reasonRestartAllContainers containerKillReason = "RestartAllContainers"
	reasonUnknown              containerKillReason = ""
)

// containerToKillInfo describes one container SyncPod kills.
type containerToKillInfo struct {
	// container is the spec of the container (init, sidecar or regular).
	container *v1.Container
	name      string
	// message is recorded in the Killing event.
	message string
	reason  containerKillReason
}

// podActions is the plan computePodActions makes for one pod and SyncPod
// carries out. It is a plain value so the plan can be table-tested without a
// runtime.
type podActions struct {
	// KillPod stops every container and the sandbox(es) of the pod first.
	KillPod bool
	// CreateSandbox creates a new sandbox with Attempt (after KillPod).
	CreateSandbox bool
	// SandboxID is the current sandbox (the one replaced when CreateSandbox).
	SandboxID string
	// Attempt is the sandbox attempt: the highest seen, +1 for a new sandbox.
	Attempt uint32
	// InitContainersToStart are indexes in pod.Spec.InitContainers, in spec
	// order: at most one regular init container (the next one to run to
	// completion) and any sidecars (restartPolicy Always) to (re)start.
	InitContainersToStart []int
	// ContainersToStart are indexes in pod.Spec.Containers.
	ContainersToStart []int
	// EphemeralContainersToStart are indexes in pod.Spec.EphemeralContainers
	// of the ones never created (they are never restarted).
	EphemeralContainersToStart []int
	// ContainersToKill are running (or unknown) containers to stop before
	// starting anything; some of them are restarted through the lists above.
	ContainersToKill map[kubecontainer.ContainerID]containerToKillInfo
	// ContainersToUpdate are running containers resized in place, per
	// resource (memory, cpu), decreases first.
	ContainersToUpdate map[v1.ResourceName][]containerToUpdate
	// UpdatePodResources resizes the pod cgroup (a container restarted for a
	// resize).
	UpdatePodResources bool
	// UpdatePodLevelResources resizes the pod cgroup to the allocated
	// pod-level resources, which differ from those last applied.
	UpdatePodLevelResources bool
	// ContainersToReset are every container instance of a pod restarting
	// all its containers (RestartAllContainers), to kill (if running) and
	// remove, in this order: the regular containers, then the init
	// containers, that did not trigger the restart, then those that did.
	ContainersToReset []containerToReset
}

// computePodActions compares the pod spec with the runtime's view of the pod
// and returns what SyncPod must do. podStatus may be nil (nothing exists yet).
// restartAll says the pod is restarting all its containers (its
// AllContainersRestarting condition is True): then, unless the sandbox must
// be replaced, the plan is only to reset every container (ContainersToReset).
func (m *Manager) computePodActions(pod *v1.Pod, podStatus *kubecontainer.PodStatus, restartAll bool) podActions {
	if podStatus == nil {
		podStatus = &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	createSandbox, attempt, sandboxID := podSandboxChanged(pod, podStatus)
	changes := podActions{
		KillPod:           createSandbox,
		CreateSandbox:     createSandbox,
		SandboxID:         sandboxID,
		Attempt:           attempt,
		ContainersToStart: []int{},
		ContainersToKill:  make(map[kubecontainer.ContainerID]containerToKillInfo),
	}
	if restartAll && !m.restart.NoRestartAll {
		changes.ContainersToReset = containersToReset(pod, podStatus)
		return changes
	}
	if createSandbox {
		m.planNewSandbox(pod, podStatus, &changes)
		return changes
	}

	// Ephemeral containers start even while the pod initializes, once each.
	for i := range pod.Spec.EphemeralContainers {
		if podStatus.FindContainerStatusByName(pod.Spec.EphemeralContainers[i].Name) == nil {
			changes.EphemeralContainersToStart = append(changes.EphemeralContainersToStart, i)
		}
	}
	initialized := m.computeInitContainerActions(pod, podStatus, &changes)
	if changes.KillPod || !initialized {
		// Initialization failed for good or is still in progress: regular
		// containers wait.
		return withoutEphemeralIfKilled(changes)
	}

	keep := m.computeContainerActions(pod, podStatus, &changes)
	if keep == 0 && len(changes.ContainersToStart) == 0 {
		// Nothing runs and nothing will: stop the pod, sidecars included.
		changes.KillPod = true
		changes.InitContainersToStart = nil
	}
	changes.UpdatePodLevelResources = m.podLevelResizeNeeded(pod)
	return withoutEphemeralIfKilled(changes)
}

// withoutEphemeralIfKilled drops the ephemeral containers to start when the
// pod is being stopped: they would have no sandbox to join.
func withoutEphemeralIfKilled(changes podActions) podActions {
	if changes.KillPod {
		changes.EphemeralContainersToStart = nil
	}
	return changes
}

// planNewSandbox fills the plan for a pod whose sandbox must be (re)created:
// everything starts over from the first init container, unless the pod already
// ran to completion and must not be restarted.
//
// As upstream, only the pod's restartPolicy says whether a pod whose containers
// already ran gets a new sandbox at all; the containers' own policies only
// spare the ones that succeeded under OnFailure.
func (m *Manager) planNewSandbox(pod *v1.Pod, podStatus *kubecontainer.PodStatus, changes *podActions) {
	if !shouldRestartOnFailure(pod) && changes.Attempt != 0 && len(podStatus.ContainerStatuses) != 0 {
		// restartPolicy Never and containers already ran: only kill the pod.
		// (No container status means none was ever created: retry the sandbox.)
		changes.CreateSandbox = false
		return
	}
	var toStart []int
	for idx := range pod.Spec.Containers {
		c := &pod.Spec.Containers[idx]
		if m.restart.RunsOnce(c, &pod.Spec) && containerSucceeded(c, podStatus) {
			continue
		}
		toStart = append(toStart, idx)
	}
	if len(toStart) == 0 && hasAnyRegularContainerCreated(pod, podStatus) {
		// Initialized before and every container is done: no new sandbox.
		changes.CreateSandbox = false
		return
	}
	if len(pod.Spec.InitContainers) != 0 {
		changes.InitContainersToStart = []int{0}
		return
	}
	changes.ContainersToStart = toStart
}

// computeInitContainerActions plans the init containers and sidecars and
// reports whether the pod is initialized (regular containers may run).
//
// It walks the init containers backwards: completed init containers may have
// been garbage collected, so the last one with a status tells the progress.
// A regular init container runs to completion, one at a time; a failed one is
// restarted as its restart policy says (initFailureRestarts), else the pod is
// killed.
// Sidecars (restartPolicy Always) start in order, the next init container
// starting once the sidecar runs, and are restarted whenever they exit.
func (m *Manager) computeInitContainerActions(pod *v1.Pod, podStatus *kubecontainer.PodStatus, changes *podActions) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	// A created or running regular container means initialization happened
	// before (its init containers may be gone now); only sidecars still matter.
	podHasInitialized := hasRegularContainerCreatedOrRunning(pod, podStatus)
	previouslyInitialized := podHasInitialized
	last := len(pod.Spec.InitContainers) - 1

	for i := last; i >= 0; i-- {
		c := &pod.Spec.InitContainers[i]
		status := podStatus.FindContainerStatusByName(c.Name)
		if status == nil {
			if previouslyInitialized && kubecontainer.IsSidecar(c) {
				changes.InitContainersToStart = append(changes.InitContainersToStart, i)
			}
			continue
		}
		if previouslyInitialized && !kubecontainer.IsSidecar(c) {
			continue
		}
		switch status.State {
		case kubecontainer.StateCreated:
			// Created but never started (the start failed): start anew.
			changes.InitContainersToStart = append(changes.InitContainersToStart, i)
		case kubecontainer.StateRunning:
			if kubecontainer.IsSidecar(c) && m.planRunningSidecar(pod, c, i, last, status, previouslyInitialized, changes) && i == last {
				podHasInitialized = true
			}
			if !kubecontainer.IsSidecar(c) {
				// A running regular init container: resized in place
				// (InPlacePodVerticalScalingInitContainers), waited for.
				m.planResize(pod, i, c, status, changes, true)
			}
		case kubecontainer.StateExited:
			if kubecontainer.IsSidecar(c) {
				changes.InitContainersToStart = append(changes.InitContainersToStart, i)
				break
			}
			if isInitContainerFailed(status) {
				if !m.initFailureRestarts(pod, c, podStatus) {
					changes.KillPod = true
					changes.InitContainersToStart = nil
					return false
				}
				changes.InitContainersToStart = append(changes.InitContainersToStart, i)
				break
			}
			if i == last {
				podHasInitialized = true
			} else {
				changes.InitContainersToStart = append(changes.InitContainersToStart, i+1)
			}
		default:
			// No exit code to try the rules on: the policies decide.
			if !kubecontainer.IsSidecar(c) && !m.restart.RestartsOnKill(c, &pod.Spec) {
				changes.KillPod = true
				changes.InitContainersToStart = nil
				return false
			}
			changes.ContainersToKill[status.ID] = containerToKillInfo{
				name: c.Name, container: c, reason: reasonUnknown,
				message: fmt.Sprintf("Init container is in %q state, try killing it before restart", status.State),
			}
			changes.InitContainersToStart = append(changes.InitContainersToStart, i)
		}
		previouslyInitialized = true
	}
	if !previouslyInitialized {
		// Nothing ran yet: start the first one.
		changes.InitContainersToStart = append(changes.InitContainersToStart, 0)
	}
	reverseInts(changes.InitContainersToStart)
	return podHasInitialized
}

// planRunningSidecar plans a running sidecar at index i and reports whether it
// counts as started (so the init containers after it may proceed).
func (m *Manager) planRunningSidecar(pod *v1.Pod, c *v1.Container, i, last int, status *kubecontainer.ContainerStatus, previouslyInitialized bool, changes *podActions) bool {
	restart := func(message string, reason containerKillReason) {
		changes.ContainersToKill[status.ID] = containerToKillInfo{name: c.Name, container: c, message: message, reason: reason}
		changes.InitContainersToStart = append(changes.InitContainersToStart, i)
	}
	if c.StartupProbe != nil {
		if m.startupFailed(status.ID) {
			restart(fmt.Sprintf("Init container %s failed startup probe", c.Name), reasonStartupProbe)
			return false
		}
		if !m.startupSucceeded(status.ID) {
			return false // wait for the startup probe
		}
	}
	if i < last && !previouslyInitialized {
		// Started for the first time: the next init container may start.
		changes.InitContainersToStart = append(changes.InitContainersToStart, i+1)
	}
	switch {
	case containerChanged(c, status.Hash):
		restart(fmt.Sprintf("Init container %s definition changed", c.Name), reasonUnknown)
	case c.LivenessProbe != nil && m.livenessFailed(status.ID):
		restart(fmt.Sprintf("Init container %s failed liveness probe", c.Name), reasonLivenessProbe)
	default:
		m.planResize(pod, i, c, status, changes, true)
	}
	return true
}

// computeContainerActions plans the regular containers and returns how many
// running containers are kept as they are.
func (m *Manager) computeContainerActions(pod *v1.Pod, podStatus *kubecontainer.PodStatus, changes *podActions) int {
	keep := 0
	for idx := range pod.Spec.Containers {
		c := &pod.Spec.Containers[idx]
		status := podStatus.FindContainerStatusByName(c.Name)
		if status == nil || status.State != kubecontainer.StateRunning {
			if m.restart.ShouldBeRestarted(c, pod, podStatus) {
				changes.ContainersToStart = append(changes.ContainersToStart, idx)
				if status != nil && status.State == kubecontainer.StateUnknown {
					// It may still run: kill it first so two never run at once.
					changes.ContainersToKill[status.ID] = containerToKillInfo{
						name: c.Name, container: c, reason: reasonUnknown,
						message: fmt.Sprintf("Container is in %q state, try killing it before restart", status.State),
					}
				}
			}
			continue
		}
		// The restart rules need an exit code: a running container killed
		// restarts as the policies say.
		restart := m.restart.RestartsOnKill(c, &pod.Spec)
		var message string
		var reason containerKillReason
		switch {
		case containerChanged(c, status.Hash):
			// A new spec means a new container, whatever the restart policy.
			message = fmt.Sprintf("Container %s definition changed", c.Name)
			restart = true
		case m.livenessFailed(status.ID):
			message = fmt.Sprintf("Container %s failed liveness probe", c.Name)
			reason = reasonLivenessProbe
		case m.startupFailed(status.ID):
			message = fmt.Sprintf("Container %s failed startup probe", c.Name)
			reason = reasonStartupProbe
		default:
			if !m.planResize(pod, idx, c, status, changes, false) {
				keep++
			}
			continue
		}
		if restart {
			message += ", will be restarted"
			changes.ContainersToStart = append(changes.ContainersToStart, idx)
		}
		changes.ContainersToKill[status.ID] = containerToKillInfo{name: c.Name, container: c, message: message, reason: reason}
	}
	return keep
}

func (m *Manager) livenessFailed(id kubecontainer.ContainerID) bool {
	return m.probeResults != nil && m.probeResults.LivenessFailed(id)
}

func (m *Manager) startupFailed(id kubecontainer.ContainerID) bool {
	return m.probeResults != nil && m.probeResults.StartupFailed(id)
}

// startupSucceeded reports whether a container's startup probe succeeded; when
// the probe results cannot tell, it is taken as succeeded.
func (m *Manager) startupSucceeded(id kubecontainer.ContainerID) bool {
	if s, ok := m.probeResults.(StartupSucceeded); ok {
		return s.StartupSucceeded(id)
	}
	return true
}

// podSandboxChanged reports whether the pod needs a new sandbox, the attempt
// for it, and the current sandbox ID. A new sandbox is needed when there is
// none, when the newest is not ready (or several are), when the network
// namespace mode changed (hostNetwork toggled), or when a pod-network sandbox
// has no IP.
func podSandboxChanged(pod *v1.Pod, podStatus *kubecontainer.PodStatus) (bool, uint32, string) {
	if len(podStatus.SandboxStatuses) == 0 {
		return true, 0, ""
	}
	ready := 0
	var maxAttempt uint32
	for _, s := range podStatus.SandboxStatuses {
		if s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready++
		}
		if a := s.GetMetadata().GetAttempt(); a > maxAttempt {
			maxAttempt = a
		}
	}
	newest := podStatus.SandboxStatuses[0]
	switch {
	case ready > 1,
		newest.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY,
		newest.GetLinux().GetNamespaces().GetOptions().GetNetwork() != networkNamespaceForPod(pod),
		!pod.Spec.HostNetwork && newest.GetNetwork() != nil && newest.GetNetwork().GetIp() == "":
		return true, maxAttempt + 1, newest.GetId()
	}
	return false, maxAttempt, newest.GetId()
}

// networkNamespaceForPod is the network namespace mode of the pod's sandbox.
func networkNamespaceForPod(pod *v1.Pod) runtimeapi.NamespaceMode {
	if pod.Spec.HostNetwork {
		return runtimeapi.NamespaceMode_NODE
	}
	return runtimeapi.NamespaceMode_POD
}

// shouldRestartOnFailure is false only for restartPolicy Never.
func shouldRestartOnFailure(pod *v1.Pod) bool {
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

// initFailureRestarts reports whether a regular init container that failed
// (exited non-zero or OOM killed) runs again. With ContainerRestartRules the
// container's own policy and rules decide on its exit code, the pod's policy
// otherwise; without it any pod policy but Never restarts it.
func (m *Manager) initFailureRestarts(pod *v1.Pod, c *v1.Container, podStatus *kubecontainer.PodStatus) bool {
	if m.restart.PodPolicyOnly {
		return shouldRestartOnFailure(pod)
	}
	return m.restart.ShouldBeRestarted(c, pod, podStatus)
}

// containerSucceeded reports whether the newest instance of c exited with 0.
func containerSucceeded(c *v1.Container, podStatus *kubecontainer.PodStatus) bool {
	s := podStatus.FindContainerStatusByName(c.Name)
	return s != nil && s.State == kubecontainer.StateExited && s.ExitCode == 0
}

// isInitContainerFailed: exited non-zero, OOM killed, or in an unknown state.
func isInitContainerFailed(s *kubecontainer.ContainerStatus) bool {
	if strings.Contains(s.Reason, "OOMKilled") {
		return true
	}
	return (s.State == kubecontainer.StateExited && s.ExitCode != 0) || s.State == kubecontainer.StateUnknown
}

// hasAnyRegularContainerCreated reports whether any regular container exists
// in any state, which means initialization completed at some point.
func hasAnyRegularContainerCreated(pod *v1.Pod, podStatus *kubecontainer.PodStatus) bool {
	for i := range pod.Spec.Containers {
		s := podStatus.FindContainerStatusByName(pod.Spec.Containers[i].Name)
		if s != nil && (s.State == kubecontainer.StateCreated || s.State == kubecontainer.StateRunning || s.State == kubecontainer.StateExited) {
			return true
		}
	}
	return false
}

// hasRegularContainerCreatedOrRunning is like hasAnyRegularContainerCreated
// without exited containers: after a node reboot every container is exited and
// the new sandbox must initialize again.
func hasRegularContainerCreatedOrRunning(pod *v1.Pod, podStatus *kubecontainer.PodStatus) bool {
	for i := range pod.Spec.Containers {
		s := podStatus.FindContainerStatusByName(pod.Spec.Containers[i].Name)
		if s != nil && (s.State == kubecontainer.StateCreated || s.State == kubecontainer.StateRunning) {
			return true
		}
	}
	return false
}

func reverseInts(s []int) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}
