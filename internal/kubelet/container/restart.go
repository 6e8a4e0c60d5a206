package container

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// RestartRules is the one place that decides whether a container that stopped
// runs again: the runtime manager's plan, the pod phase, the status manager and
// the prober all ask it, so they never disagree.
//
// With the ContainerRestartRules feature gate on (upstream's default since
// v1.35), a container's own restartPolicy overrides the pod's, and its
// restartPolicyRules are tried first, in order, on the exit code. With the
// gate off only the pod's restartPolicy counts (a sidecar, an init container
// with restartPolicy Always, is always restarted either way; callers treat
// sidecars on their own).
//
// A rule with the RestartAllContainers action (gate
// RestartAllContainersOnContainerExits, on by default) restarts the container
// too, and with it every other container of the pod, in place: the runtime
// manager kills and removes all the pod's containers and the pod starts over
// from its first init container in the same sandbox
// (ShouldAllContainersRestart, AllContainersRestartCleanedUp). With that gate
// off such a rule is passed over and the container's own policy decides.
//
// The zero value is upstream's default: both gates on.
type RestartRules struct {
	// PodPolicyOnly is ContainerRestartRules turned off.
	PodPolicyOnly bool
	// NoRestartAll is RestartAllContainersOnContainerExits turned off.
	NoRestartAll bool
}

// ShouldRestart reports whether c, which exited with exitCode, is run again
// (upstream ContainerShouldRestart): the first restart rule matching the exit
// code with action Restart (or RestartAllContainers, unless NoRestartAll),
// else the container's restartPolicy, else the pod's (an unset pod policy
// counts as Always).
func (r RestartRules) ShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if !r.PodPolicyOnly && c.RestartPolicy != nil {
		if rule, ok := MatchingRestartRule(c, exitCode); ok {
			switch rule.Action {
			case v1.ContainerRestartRuleActionRestart:
				return true
			case v1.ContainerRestartRuleActionRestartAllContainers:
				if !r.NoRestartAll {
					return true
				}
			}
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	}
	return true
}

// ShouldBeRestarted reports whether the next sync (re)starts c from the
// runtime's view of it (upstream ShouldContainerBeRestarted): never for a pod
// being deleted, always for a container never created (or whose statuses were
// all garbage collected) and for one created but not started or in an unknown
// state, never while it runs, and for an exited one as ShouldRestart says.
func (r RestartRules) ShouldBeRestarted(c *v1.Container, pod *v1.Pod, ps *PodStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	status := ps.FindContainerStatusByName(c.Name)
	switch {
	case status == nil:
		return true
	case status.State == StateRunning:
		return false
	case status.State == StateUnknown || status.State == StateCreated:
		return true
	}
	return r.ShouldRestart(c, &pod.Spec, int32(status.ExitCode))
}

// RestartsOnKill reports whether c, killed while running (a failed liveness or
// startup probe, a resize needing a restart), is started again: the exit code
// is not known then, so the rules are not tried; the container's restartPolicy
// decides, else the pod's (anything but Never restarts).
func (r RestartRules) RestartsOnKill(c *v1.Container, spec *v1.PodSpec) bool {
	if !r.PodPolicyOnly && c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

// RunsOnce reports whether a regular container that already succeeded is
// left alone when the pod gets a new sandbox: its effective restartPolicy is
// OnFailure (the container's own, else the pod's).
func (r RestartRules) RunsOnce(c *v1.Container, spec *v1.PodSpec) bool {
	if !r.PodPolicyOnly && c.RestartPolicy != nil {
		return *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
	}
	return spec.RestartPolicy == v1.RestartPolicyOnFailure
}

// MatchingRestartRule returns the first of c's restart rules whose exit code
// requirement exitCode meets (upstream FindMatchingContainerRestartRule),
// whatever its action. A rule without exit codes or with an unknown operator
// matches nothing.
func MatchingRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		listed := slices.Contains(rule.ExitCodes.Values, exitCode)
		switch rule.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if listed {
				return rule, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !listed {
				return rule, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// PodContainers lists the pod's init containers, then its app containers
// (not the ephemeral ones).
func PodContainers(pod *v1.Pod) []*v1.Container {
	out := make([]*v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

// IsSidecar reports whether an init container is a sidecar (a restartable init
// container: restartPolicy Always).
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}
