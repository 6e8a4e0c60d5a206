package container

import (
	v1 "k8s.io/api/core/v1"
)

// The RestartAllContainers rule action (KEP-5532, upstream's
// RestartAllContainersOnContainerExits gate) restarts a pod in place. Its
// state lives in the pod's AllContainersRestarting condition:
//
//  1. a container (init, sidecar or regular) exits with a code matching a
//     rule with that action: the next API status sets the condition True
//     (ShouldAllContainersRestart);
//  2. the sync that sees the condition True kills (without grace) and
//     removes every container of the pod, the sources of the restart last,
//     keeping their logs; the sandbox stays;
//  3. once no container is left (AllContainersRestartCleanedUp) the
//     condition turns False and the pod starts over from its first init
//     container; each container's status carries its restart count on and
//     keeps the termination before the reset as its last state.

// AllContainersCouldRestart reports whether a container or init container of
// spec has a rule with the RestartAllContainers action (upstream's
// podutil.AllContainersCouldRestart): every container of such a pod may run
// again whatever its own policy.
func AllContainersCouldRestart(spec *v1.PodSpec) bool {
	if spec == nil {
		return false
	}
	for _, list := range [][]v1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			for _, rule := range list[i].RestartPolicyRules {
				if rule.Action == v1.ContainerRestartRuleActionRestartAllContainers {
					return true
				}
			}
		}
	}
	return false
}

// ShouldAllContainersRestart reports whether the pod is restarting all its
// containers (upstream's ShouldAllContainersRestart): apiStatus (the status
// the kubelet last set, may be nil) has the AllContainersRestarting
// condition True, or a container exited, as the runtime (ps, may be nil) or
// apiStatus tells, with a code matching one of its rules with the
// RestartAllContainers action. Always false with NoRestartAll.
func (r RestartRules) ShouldAllContainersRestart(pod *v1.Pod, ps *PodStatus, apiStatus *v1.PodStatus) bool {
	if r.NoRestartAll {
		return false
	}
	if apiStatus != nil && PodConditionTrue(apiStatus.Conditions, v1.AllContainersRestarting) {
		return true
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if exitTriggersRestartAll(&list[i], ps, apiStatus) {
				return true
			}
		}
	}
	return false
}

// exitTriggersRestartAll reports whether the newest exit of c, in the
// runtime or in the API status, matches a RestartAllContainers rule.
func exitTriggersRestartAll(c *v1.Container, ps *PodStatus, apiStatus *v1.PodStatus) bool {
	if s := ps.FindContainerStatusByName(c.Name); s != nil && s.State == StateExited && ExitRestartsAll(c, int32(s.ExitCode)) {
		return true
	}
	if apiStatus == nil {
		return false
	}
	for _, list := range [][]v1.ContainerStatus{apiStatus.InitContainerStatuses, apiStatus.ContainerStatuses} {
		for i := range list {
			if list[i].Name != c.Name || list[i].State.Terminated == nil {
				continue
			}
			return ExitRestartsAll(c, list[i].State.Terminated.ExitCode)
		}
	}
	return false
}

// ExitRestartsAll reports whether c exiting with exitCode restarts all the
// containers of its pod: the first of its rules matching the code has the
// RestartAllContainers action.
func ExitRestartsAll(c *v1.Container, exitCode int32) bool {
	rule, ok := MatchingRestartRule(c, exitCode)
	return ok && rule.Action == v1.ContainerRestartRuleActionRestartAllContainers
}

// PodConditionTrue reports whether conds has the condition t with status True.
func PodConditionTrue(conds []v1.PodCondition, t v1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

// AllContainersRestartCleanedUp reports whether no container or init
// container of the pod is left in the runtime (upstream's
// AllContainersRestartCleanedUp): the reset of a RestartAllContainers is done.
func AllContainersRestartCleanedUp(pod *v1.Pod, ps *PodStatus) bool {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if ps.FindContainerStatusByName(list[i].Name) != nil {
				return false
			}
		}
	}
	return true
}
