package kuberuntime

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// containerToReset is one container instance a RestartAllContainers removes.
type containerToReset struct {
	id        kubecontainer.ContainerID
	container *v1.Container
	// kill: it is not exited yet, kill it (without grace) before removal.
	kill bool
}

// containersToReset lists every instance (not only the newest) of the pod's
// containers in the runtime, for a RestartAllContainers (upstream's
// getContainersToReset): the regular containers, then the init containers,
// that did not trigger it, then the regular and the init containers whose
// exit did (an exit code matching a RestartAllContainers rule), so that the
// triggering exits are seen until the very end.
func containersToReset(pod *v1.Pod, podStatus *kubecontainer.PodStatus) []containerToReset {
	initSources, initTargets := splitContainersToReset(pod.Spec.InitContainers, podStatus)
	sources, targets := splitContainersToReset(pod.Spec.Containers, podStatus)
	out := make([]containerToReset, 0, len(initSources)+len(initTargets)+len(sources)+len(targets))
	out = append(out, targets...)
	out = append(out, initTargets...)
	out = append(out, sources...)
	return append(out, initSources...)
}

// splitContainersToReset returns the instances of containers that exited
// with a code matching a RestartAllContainers rule (sources) and the others
// (targets), in spec order.
func splitContainersToReset(containers []v1.Container, podStatus *kubecontainer.PodStatus) (sources, targets []containerToReset) {
	for i := range containers {
		c := &containers[i]
		for _, s := range podStatus.ContainerStatuses {
			if s.Name != c.Name {
				continue
			}
			r := containerToReset{id: s.ID, container: c}
			if s.State != kubecontainer.StateExited {
				r.kill = true
				targets = append(targets, r)
				continue
			}
			if kubecontainer.ExitRestartsAll(c, int32(s.ExitCode)) {
				sources = append(sources, r)
			} else {
				targets = append(targets, r)
			}
		}
	}
	return sources, targets
}

// resetContainers kills (without grace: the runtime's minimum) and removes
// the containers of a pod restarting all its containers, keeping their logs
// (the restart count of the next instance is read from them; they go with
// the pod). It stops at the first failure and reports whether all went.
func (m *Manager) resetContainers(ctx context.Context, pod *v1.Pod, reset []containerToReset, result *kubecontainer.PodSyncResult) bool {
	var noGrace int64
	for _, c := range reset {
		r := &kubecontainer.SyncResult{Action: kubecontainer.RemoveContainer, Target: c.container.Name}
		result.Add(r)
		if c.kill {
			req := killRequest{pod: pod, id: c.id, name: c.container.Name, message: "killing",
				reason: reasonRestartAllContainers, gracePeriodOverride: &noGrace}
			if err := m.killContainer(ctx, req); err != nil {
				r.Fail(kubecontainer.ErrKillContainer, err.Error())
				m.logger.Error("kill container before the pod restarts failed", zap.String("pod", formatPod(pod)),
					zap.String("container", c.container.Name), zap.String("containerID", c.id.String()), zap.Error(err))
				return false
			}
		}
		if err := m.runtime.RemoveContainer(ctx, c.id.ID); err != nil && !crierrors.IsNotFound(err) {
			err = fmt.Errorf("remove container %s: %w", c.id.ID, err)
			r.Fail(kubecontainer.ErrRemoveContainer, err.Error())
			m.logger.Error("remove container before the pod restarts failed", zap.String("pod", formatPod(pod)),
				zap.String("container", c.container.Name), zap.String("containerID", c.id.String()), zap.Error(err))
			return false
		}
	}
	return true
}
