package apistatus

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// initPhaseCounts are the regular init containers' contribution to the pod
// phase.
type initPhaseCounts struct {
	pendingRegular   int // regular init containers not yet completed
	failedNotRestart int // init containers that failed and will not be restarted
}

// phaseCounts counts the sidecars and regular containers by state.
type phaseCounts struct {
	unknown, running, waiting, stopped, stoppedNotRestartable, succeeded int
	pendingSidecars                                                      int // sidecars not yet started
}

// getPhase computes the pod phase from its container statuses, as upstream's
// getPhase does, rules saying which stopped containers will run again:
//   - an init container that failed and will not be restarted fails the pod;
//   - any pending init container or waiting container keeps the pod Pending
//     (a sidecar not yet started only until a regular container has run);
//   - every container started and one running: Running;
//   - every container stopped: Succeeded/Failed for a terminal (non-static) pod,
//     Running while some will be restarted (those stopped to restart all the
//     pod's containers too), else Succeeded when all exited 0 and Failed
//     otherwise.
func getPhase(pod *v1.Pod, info []v1.ContainerStatus, podIsTerminal, podHasInitialized bool, rules kubecontainer.RestartRules) v1.PodPhase {
	ic := countInitContainers(pod, info, rules)
	c := countContainers(pod, info, rules)
	if ic.failedNotRestart > 0 {
		return v1.PodFailed
	}
	switch {
	case ic.pendingRegular > 0 || (c.pendingSidecars > 0 && !podHasInitialized):
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

// lastExit is the exit code of a stopped container: terminated, or waiting
// to run again after it terminated.
func lastExit(cs *v1.ContainerStatus) (int32, bool) {
	switch {
	case cs.State.Terminated != nil:
		return cs.State.Terminated.ExitCode, true
	case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
		return cs.LastTerminationState.Terminated.ExitCode, true
	}
	return 0, false
}

// restartable reports whether the stopped container c (status cs, exit
// code) runs again: as rules say for its exit code, or, with
// RestartAllContainers, because it was stopped to restart all the pod's
// containers (its termination's reason is RestartingAllContainers).
func restartable(c *v1.Container, spec *v1.PodSpec, cs *v1.ContainerStatus, code int32, rules kubecontainer.RestartRules) bool {
	if rules.ShouldRestart(c, spec, code) {
		return true
	}
	if rules.NoRestartAll {
		return false
	}
	t := cs.State.Terminated
	if t == nil {
		t = cs.LastTerminationState.Terminated
	}
	return t != nil && t.Reason == ReasonRestartingAllContainers
}

func countInitContainers(pod *v1.Pod, info []v1.ContainerStatus, rules kubecontainer.RestartRules) initPhaseCounts {
	var n initPhaseCounts
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if kubecontainer.IsSidecar(c) {
			continue
		}
		cs := findStatus(info, c.Name)
		if cs == nil || cs.State.Running != nil {
			n.pendingRegular++
			continue
		}
		code, stopped := lastExit(cs)
		switch {
		case !stopped:
			n.pendingRegular++
		case code != 0 && !restartable(c, &pod.Spec, cs, code, rules):
			n.failedNotRestart++
		}
	}
	return n
}

func countContainers(pod *v1.Pod, info []v1.ContainerStatus, rules kubecontainer.RestartRules) phaseCounts {
	var n phaseCounts
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; kubecontainer.IsSidecar(c) {
			n.addSidecar(findStatus(info, c.Name))
		}
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := findStatus(info, c.Name)
		switch {
		case cs == nil:
			n.unknown++
			continue
		case cs.State.Running != nil:
			n.running++
			continue
		}
		code, stopped := lastExit(cs)
		switch {
		case stopped:
			n.stopped++
			if cs.State.Terminated != nil && code == 0 {
				n.succeeded++
			}
			if !restartable(c, &pod.Spec, cs, code, rules) {
				n.stoppedNotRestartable++
			}
		case cs.State.Waiting != nil:
			n.waiting++
		default:
			n.unknown++
		}
	}
	return n
}

// addSidecar counts a sidecar: a stopped one does not count for the phase; one
// running but not started, or waiting for its first start, is pending.
func (n *phaseCounts) addSidecar(cs *v1.ContainerStatus) {
	switch {
	case cs == nil:
		n.unknown++
	case cs.State.Running != nil:
		if cs.Started == nil || !*cs.Started {
			n.pendingSidecars++
		}
		n.running++
	case cs.State.Terminated != nil, cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
		// stopped: it is restarted whatever the phase
	case cs.State.Waiting != nil:
		n.pendingSidecars++
		n.waiting++
	default:
		n.pendingSidecars++
		n.unknown++
	}
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

func findStatus(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}
