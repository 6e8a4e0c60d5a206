package kuberuntime

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// crashLoopKey is the back-off key of a container: the pod (name, namespace,
// UID), the container name and its spec hash, so a new spec starts a fresh
// back-off.
func crashLoopKey(pod *v1.Pod, container *v1.Container) string {
	hash := strconv.FormatUint(hashContainer(container), 16)
	return fmt.Sprintf("%s_%s_%s_%s_%s", pod.Name, pod.Namespace, pod.UID, container.Name, hash)
}

// formatPod names a pod in messages the way upstream does: name_namespace(uid).
func formatPod(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// doBackOff applies CrashLoopBackOff before (re)starting a container. The clock
// starts when the newest instance of the container finished; while inside the
// window it returns true with the message and kubecontainer.ErrCrashLoopBackOff.
// Otherwise it advances the back-off (10s doubling up to the back-off's
// maximum, reset after it was quiet for twice the maximum) and returns false.
func (m *Manager) doBackOff(pod *v1.Pod, container *v1.Container, podStatus *kubecontainer.PodStatus, backOff *flowcontrol.Backoff) (bool, string, error) {
	if backOff == nil {
		return false, "", nil
	}
	var exited *kubecontainer.ContainerStatus
	for _, s := range podStatus.ContainerStatusesByName(container.Name) {
		if s.State == kubecontainer.StateExited {
			exited = s
			break
		}
	}
	if exited == nil {
		return false, "", nil
	}
	key := crashLoopKey(pod, container)
	if backOff.IsInBackOffSince(key, exited.FinishedAt) {
		m.recorder.Eventf(pod, v1.EventTypeWarning, "BackOff",
			"Back-off restarting failed container %s in pod %s", container.Name, formatPod(pod))
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backOff.Get(key), container.Name, formatPod(pod))
		return true, msg, kubecontainer.ErrCrashLoopBackOff
	}
	backOff.Next(key, exited.FinishedAt)
	return false, "", nil
}
