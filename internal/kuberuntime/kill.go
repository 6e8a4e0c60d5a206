package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	crierrors "k8s.io/cri-api/pkg/errors"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// minimumGracePeriodInSeconds is the least time a container gets to stop
// before SIGKILL, whatever the grace period says (as upstream).
const minimumGracePeriodInSeconds = 2

// killRequest describes one container to stop.
type killRequest struct {
	// pod may be nil (an orphan): the spec is then restored from the labels.
	pod     *v1.Pod
	id      kubecontainer.ContainerID
	name    string
	message string
	reason  containerKillReason
	// gracePeriodOverride replaces the pod's grace period when set.
	gracePeriodOverride *int64
	// order holds a sidecar back while the containers it serves run
	// (nil: stop at once).
	order *stopOrder
}

// KillPod stops every container of the pod in parallel (each runs its preStop
// hook first, within the grace period) and then stops every sandbox; the GC
// removes them later. pod may be nil for a pod the kubelet no longer knows;
// runningPod may be nil, it is then read from the runtime (pod must be set).
// gracePeriodOverride replaces the pod's terminationGracePeriodSeconds.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, runningPod *kubecontainer.Pod, gracePeriodOverride *int64) error {
	if runningPod == nil {
		if pod == nil {
			return errors.New("kill pod: neither the pod nor its running state given")
		}
		status, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			return fmt.Errorf("kill pod %s: %w", formatPod(pod), err)
		}
		runningPod = podStatusToRunningPod(m.runtimeName, status)
	}
	result := m.killPodWithSyncResult(ctx, pod, runningPod, gracePeriodOverride)
	return result.Error()
}

// killPodWithSyncResult kills the running containers, then stops the sandboxes.
func (m *Manager) killPodWithSyncResult(ctx context.Context, pod *v1.Pod, runningPod *kubecontainer.Pod, gracePeriodOverride *int64) kubecontainer.PodSyncResult {
	var result kubecontainer.PodSyncResult
	for _, r := range m.killContainersWithSyncResult(ctx, pod, runningPod, gracePeriodOverride) {
		result.Add(r)
	}
	sandboxResult := &kubecontainer.SyncResult{Action: kubecontainer.KillPodSandbox, Target: string(runningPod.ID)}
	result.Add(sandboxResult)
	for _, sb := range runningPod.Sandboxes {
		if err := m.runtime.StopPodSandbox(ctx, sb.ID.ID); err != nil && !crierrors.IsNotFound(err) {
			sandboxResult.Fail(kubecontainer.ErrKillPodSandbox, err.Error())
			m.logger.Error("stop pod sandbox failed", zap.String("pod", podRef(pod, runningPod)),
				zap.String("sandbox", sb.ID.ID), zap.Error(err))
		}
	}
	return result
}

// killContainersWithSyncResult stops the running containers in parallel.
// Each begins at once (Killing event, preStop hook), but the sidecars are
// stopped only after the regular containers, in the reverse order of the
// spec (stopOrder), within their grace period.
func (m *Manager) killContainersWithSyncResult(ctx context.Context, pod *v1.Pod, runningPod *kubecontainer.Pod, gracePeriodOverride *int64) []*kubecontainer.SyncResult {
	names := make([]string, 0, len(runningPod.Containers))
	for _, c := range runningPod.Containers {
		names = append(names, c.Name)
	}
	order := newStopOrder(pod, names)
	results := make([]*kubecontainer.SyncResult, len(runningPod.Containers))
	var wg sync.WaitGroup
	for i, c := range runningPod.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer logging.HandleCrash(m.logger, "kill container")
			r := &kubecontainer.SyncResult{Action: kubecontainer.KillContainer, Target: c.Name}
			req := killRequest{pod: pod, id: c.ID, name: c.Name, gracePeriodOverride: gracePeriodOverride, order: order}
			if err := m.killContainer(ctx, req); err != nil {
				r.Fail(kubecontainer.ErrKillContainer, err.Error())
				m.logger.Error("kill container failed", zap.String("pod", podRef(pod, runningPod)),
					zap.String("container", c.Name), zap.String("containerID", c.ID.String()), zap.Error(err))
			}
			results[i] = r
		}()
	}
	wg.Wait()
	return results
}

// killContainer stops one container: it records a Killing event, runs the
// preStop hook within the grace period, waits for its turn (k.order: a
// sidecar) within what is left of it, then calls StopContainer with the rest
// (at least 2 seconds). A container the runtime no longer knows counts as
// stopped.
func (m *Manager) killContainer(ctx context.Context, k killRequest) error {
	pod, spec, err := m.specsForKill(ctx, k)
	if err != nil {
		return err
	}
	grace := terminationGracePeriod(pod, spec, k.reason)
	if k.gracePeriodOverride != nil {
		grace = *k.gracePeriodOverride
	}
	message := k.message
	if message == "" {
		message = fmt.Sprintf("Stopping container %s", spec.Name)
	}
	m.recorder.Eventf(pod, v1.EventTypeNormal, "Killing", "%s", message)

	remaining := grace
	if spec.Lifecycle != nil && spec.Lifecycle.PreStop != nil && remaining > 0 {
		took := m.runPreStopHook(ctx, pod, spec, k.id, time.Duration(remaining)*time.Second)
		remaining -= int64(took.Seconds())
	}
	if k.order != nil && remaining > 0 {
		remaining -= int64(k.order.wait(k.name, time.Duration(remaining)*time.Second).Seconds())
	}
	if remaining < minimumGracePeriodInSeconds {
		remaining = minimumGracePeriodInSeconds
	}
	m.logger.Debug("stopping container", zap.String("pod", formatPod(pod)), zap.String("container", k.name),
		zap.String("containerID", k.id.String()), zap.Int64("gracePeriod", remaining))
	if err := m.runtime.StopContainer(ctx, k.id.ID, remaining); err != nil && !crierrors.IsNotFound(err) {
		return fmt.Errorf("stop container %q (%s) with grace %ds: %w", k.name, k.id, remaining, err)
	}
	k.order.done(k.name)
	return nil
}

// specsForKill returns the pod and container spec to kill with; when the pod
// or the container's spec is unknown they are restored from the container's
// labels and annotations.
func (m *Manager) specsForKill(ctx context.Context, k killRequest) (*v1.Pod, *v1.Container, error) {
	if k.pod != nil {
		if spec := containerSpecByName(k.pod, k.name); spec != nil {
			return k.pod, spec, nil
		}
	}
	pod, spec, err := m.restoreSpecsFromContainer(ctx, k.id)
	if err != nil {
		return nil, nil, fmt.Errorf("restore the spec of container %q (%s) to kill it: %w", k.name, k.id, err)
	}
	if k.pod != nil {
		pod = k.pod
	}
	return pod, spec, nil
}

// runPreStopHook runs the preStop hook, waiting at most budget, and returns
// how long it took.
func (m *Manager) runPreStopHook(ctx context.Context, pod *v1.Pod, spec *v1.Container, id kubecontainer.ContainerID, budget time.Duration) time.Duration {
	start := time.Now()
	hctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer logging.HandleCrash(m.logger, "preStop hook")
		if msg, err := m.runLifecycleHandler(hctx, pod, spec, id, spec.Lifecycle.PreStop, ""); err != nil {
			m.logger.Warn("preStop hook failed", zap.String("pod", formatPod(pod)), zap.String("container", spec.Name),
				zap.String("message", msg), zap.Error(err))
			// The message is not put in the event: it may hold secrets.
			m.recorder.Eventf(pod, v1.EventTypeWarning, "FailedPreStopHook", "PreStopHook failed for container %s", spec.Name)
		}
	}()
	select {
	case <-done:
	case <-hctx.Done():
		m.logger.Info("preStop hook did not finish within the grace period", zap.String("pod", formatPod(pod)),
			zap.String("container", spec.Name), zap.Duration("budget", budget))
	}
	return time.Since(start)
}

// restoreSpecsFromContainer rebuilds the parts of the pod and container spec
// that killing needs from the container's labels and annotations.
func (m *Manager) restoreSpecsFromContainer(ctx context.Context, id kubecontainer.ContainerID) (*v1.Pod, *v1.Container, error) {
	resp, err := m.runtime.ContainerStatus(ctx, id.ID, false)
	if err != nil {
		return nil, nil, fmt.Errorf("container status: %w", err)
	}
	s := resp.GetStatus()
	if s == nil {
		return nil, nil, errors.New("container status: the runtime returned no status")
	}
	l := getLabeledInfo(s.GetLabels())
	a := getAnnotatedInfo(s.GetAnnotations(), m.logger)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			UID: l.PodUID, Name: l.PodName, Namespace: l.PodNamespace,
			DeletionGracePeriodSeconds: a.PodDeletionGracePeriod,
		},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: a.PodTerminationGracePeriod},
	}
	container := &v1.Container{Name: l.ContainerName, Ports: a.ContainerPorts, TerminationMessagePath: a.TerminationMessagePath}
	if a.PreStopHandler != nil {
		container.Lifecycle = &v1.Lifecycle{PreStop: a.PreStopHandler}
	}
	return pod, container, nil
}

// terminationGracePeriod is the grace period for killing a container: the
// pod's deletion grace period when it is being deleted, else a probe's own
// grace period when that probe failed, else the pod's
// terminationGracePeriodSeconds, else the minimum.
func terminationGracePeriod(pod *v1.Pod, spec *v1.Container, reason containerKillReason) int64 {
	if pod.DeletionGracePeriodSeconds != nil {
		return *pod.DeletionGracePeriodSeconds
	}
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		return minimumGracePeriodInSeconds
	}
	var probe *v1.Probe
	switch reason {
	case reasonStartupProbe:
		probe = spec.StartupProbe
	case reasonLivenessProbe:
		probe = spec.LivenessProbe
	}
	if probe != nil && probe.TerminationGracePeriodSeconds != nil {
		return *probe.TerminationGracePeriodSeconds
	}
	return *pod.Spec.TerminationGracePeriodSeconds
}

// containerSpecByName finds a container or init container of the pod.
func containerSpecByName(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

// podStatusToRunningPod keeps what KillPod needs from a status: the running
// containers and every sandbox.
func podStatusToRunningPod(runtimeName string, status *kubecontainer.PodStatus) *kubecontainer.Pod {
	p := &kubecontainer.Pod{ID: status.ID, Name: status.Name, Namespace: status.Namespace}
	for _, c := range status.ContainerStatuses {
		if c.State != kubecontainer.StateRunning {
			continue
		}
		p.Containers = append(p.Containers, &kubecontainer.Container{
			ID: c.ID, Name: c.Name, Image: c.Image, ImageID: c.ImageID, Hash: c.Hash, State: c.State,
		})
	}
	for _, s := range status.SandboxStatuses {
		p.Sandboxes = append(p.Sandboxes, &kubecontainer.Container{
			ID:    kubecontainer.ContainerID{Type: runtimeName, ID: s.GetId()},
			State: sandboxState(s.GetState()),
		})
	}
	return p
}

// sandboxState maps a sandbox state to a container state (ready = running).
func sandboxState(s runtimeapi.PodSandboxState) kubecontainer.State {
	switch s {
	case runtimeapi.PodSandboxState_SANDBOX_READY:
		return kubecontainer.StateRunning
	case runtimeapi.PodSandboxState_SANDBOX_NOTREADY:
		return kubecontainer.StateExited
	}
	return kubecontainer.StateUnknown
}

// podRef names a pod for logs from the spec or, without one, the running pod.
func podRef(pod *v1.Pod, runningPod *kubecontainer.Pod) string {
	if pod != nil {
		return formatPod(pod)
	}
	return fmt.Sprintf("%s_%s(%s)", runningPod.Name, runningPod.Namespace, runningPod.ID)
}
