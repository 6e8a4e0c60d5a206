package apistatus

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
)

// initPhaseCounts are the init containers' contribution to the pod phase.
type initPhaseCounts struct {
	pendingRegular     int // regular init containers not yet completed
	pendingRestartable int // sidecars not yet started
	failedNotRestart   int // init containers that failed and will not be restarted
}

// phaseCounts counts the sidecars and regular containers by state.
type phaseCounts struct {
	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded int
}

// getPhase computes the pod phase from its container statuses, as upstream's
// getPhase does (with per-container restart policies honoured):
//   - an init container that failed and will not be restarted fails the pod;
//   - any pending init container or waiting container keeps the pod Pending;
//   - every container started and one running: Running;
//   - every container stopped: Succeeded/Failed for a terminal (non-static) pod,
//     Running while some will be restarted, else Succeeded when all exited 0 and
//     Failed otherwise.
func getPhase(pod *v1.Pod, info []v1.ContainerStatus, podIsTerminal, podHasInitialized bool) v1.PodPhase {
	ic := countInitContainers(pod, info)
	c := countContainers(pod, info)
	if ic.failedNotRestart > 0 {
		return v1.PodFailed
	}
	switch {
	case ic.pendingRegular > 0 || (ic.pendingRestartable > 0 && !podHasInitialized):
		return v1.PodPending
	case c.waiting > 0:
		return v1.PodPending
	case c.running > 0 && c.unknown == 0:
		return v1.PodRunning
	case c.running == 0 && c.stopped > 0 && c.unknown == 0:
		if podIsTerminal && !kubecontainer.IsStaticPod(pod) {
			if c.stopped == c.succeeded {
				return v1.PodSucceeded
			}
			return v1.PodFailed
		}
		if c.stopped != c.stoppedNotRestartable {
			return v1.PodRunning // some containers are being restarted
		}
		if c.stopped == c.succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	default:
		return v1.PodPending
	}
}

func countInitContainers(pod *v1.Pod, info []v1.ContainerStatus) initPhaseCounts {
	var n initPhaseCounts
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if status.IsRestartableInitContainer(c) {
			continue
		}
		cs := findStatus(info, c.Name)
		switch {
		case cs == nil, cs.State.Running != nil:
			n.pendingRegular++
		case cs.State.Terminated != nil:
			if code := cs.State.Terminated.ExitCode; code != 0 && !containerShouldRestart(c, &pod.Spec, code) {
				n.failedNotRestart++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			if code := cs.LastTerminationState.Terminated.ExitCode; code != 0 && !containerShouldRestart(c, &pod.Spec, code) {
				n.failedNotRestart++
			}
		default:
			n.pendingRegular++
		}
	}
	return n
}

func countContainers(pod *v1.Pod, info []v1.ContainerStatus) phaseCounts {
	var n phaseCounts
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !status.IsRestartableInitContainer(c) {
			continue
		}
		cs := findStatus(info, c.Name)
		switch {
		case cs == nil:
			n.unknown++
		case cs.State.Running != nil:
			n.running++
		case cs.State.Terminated != nil, cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			// a stopped sidecar does not count for the phase
		case cs.State.Waiting != nil:
			n.waiting++
		default:
			n.unknown++
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := findStatus(info, c.Name)
		var last *v1.ContainerStateTerminated
		switch {
		case cs == nil:
			n.unknown++
			continue
		case cs.State.Running != nil:
			n.running++
			continue
		case cs.State.Terminated != nil:
			last = cs.State.Terminated
			if last.ExitCode == 0 {
				n.succeeded++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			last = cs.LastTerminationState.Terminated
		case cs.State.Waiting != nil:
			n.waiting++
			continue
		default:
			n.unknown++
			continue
		}
		n.stopped++
		if !containerShouldRestart(c, &pod.Spec, last.ExitCode) {
			n.stoppedNotRestartable++
		}
	}
	return n
}

// podHasInitialized reports whether a regular container of the pod has run
// (upstream HasAnyActiveRegularContainerStarted): such a pod does not go back to
// Pending while its sidecars restart.
func podHasInitialized(spec *v1.PodSpec, ps *kubecontainer.PodStatus) bool {
	if ps == nil {
		return false
	}
	for _, cs := range ps.ContainerStatuses {
		if !slices.ContainsFunc(spec.Containers, func(c v1.Container) bool { return c.Name == cs.Name }) {
			continue
		}
		if cs.State == kubecontainer.StateRunning || cs.State == kubecontainer.StateExited {
			return true
		}
	}
	return false
}

// containerShouldRestart reports whether a container that exited with exitCode
// will be restarted: the container's own restart policy and rules first, then
// the pod's.
func containerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		for _, rule := range c.RestartPolicyRules {
			if rule.ExitCodes != nil && exitCodeMatches(rule.ExitCodes, exitCode) {
				return rule.Action == v1.ContainerRestartRuleActionRestart
			}
		}
		return policyRestarts(v1.RestartPolicy(*c.RestartPolicy), exitCode)
	}
	return policyRestarts(spec.RestartPolicy, exitCode)
}

func policyRestarts(p v1.RestartPolicy, exitCode int32) bool {
	switch p {
	case v1.RestartPolicyAlways:
		return true
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return false
}

func exitCodeMatches(r *v1.ContainerRestartRuleOnExitCodes, code int32) bool {
	in := slices.Contains(r.Values, code)
	switch r.Operator {
	case v1.ContainerRestartRuleOnExitCodesOpIn:
		return in
	case v1.ContainerRestartRuleOnExitCodesOpNotIn:
		return !in
	}
	return false
}

// shouldContainerBeRestarted reports whether the next sync would (re)start the
// container, from the runtime's view of it (upstream ShouldContainerBeRestarted).
func shouldContainerBeRestarted(c *v1.Container, pod *v1.Pod, ps *kubecontainer.PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	cs := ps.FindContainerStatusByName(c.Name)
	switch {
	case cs == nil:
		return true
	case cs.State == kubecontainer.StateRunning:
		return false
	case cs.State == kubecontainer.StateUnknown || cs.State == kubecontainer.StateCreated:
		return true
	}
	return containerShouldRestart(c, &pod.Spec, int32(cs.ExitCode))
}

func findStatus(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}
