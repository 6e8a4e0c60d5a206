package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"go.uber.org/zap"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/faultinject"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// Event reasons (upstream's).
const (
	eventSandboxChanged         = "SandboxChanged"
	eventFailedCreatePodSandBox = "FailedCreatePodSandBox"
	eventFailedStatusPodSandBox = "FailedPodSandBoxStatus"
	eventFailed                 = "Failed"
	eventCreated                = "Created"
	eventStarted                = "Started"
	eventFailedPostStartHook    = "FailedPostStartHook"
)

// logFileRestartCount matches the container log files <restartCount>.log[.*].
var logFileRestartCount = regexp.MustCompile(`^(\d+)\.log(\..*)?$`)

// SyncPod brings the pod's sandbox and containers to what the spec asks for,
// in these steps:
//
//  1. computePodActions makes the plan from the spec and podStatus.
//  2. When the plan says KillPod (sandbox changed, or nothing should run any
//     more), the whole pod is stopped; for a new sandbox the old init
//     containers are removed.
//  3. Otherwise the containers the plan does not keep are stopped, and for a
//     pod restarting all its containers (restartAllContainers: its
//     AllContainersRestarting condition is True) every container is killed
//     and removed; the next sync starts the pod over in the same sandbox.
//  4. A new sandbox is created when needed (generatePodSandboxConfig,
//     RunPodSandbox with the pod's runtimeClassName as handler, then
//     PodSandboxStatus for the pod IPs).
//  5. Init containers and sidecars start in spec order; a regular init
//     container that fails to start ends the sync, a sidecar does not.
//  6. Regular containers start.
//
// Starting a container checks the CrashLoopBackOff in backOff, ensures the
// image, creates and starts the container and runs its postStart hook. Every
// action is reported in the result.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, pullSecrets []v1.Secret, backOff *flowcontrol.Backoff, restartAllContainers bool) kubecontainer.PodSyncResult {
	var result kubecontainer.PodSyncResult
	if podStatus == nil {
		podStatus = &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	// Step 1: plan.
	m.initActuated(pod)
	changes := m.computePodActions(pod, podStatus, restartAllContainers)
	m.logger.Debug("computed pod actions", zap.String("pod", formatPod(pod)), zap.Bool("killPod", changes.KillPod),
		zap.Bool("createSandbox", changes.CreateSandbox), zap.Ints("initContainersToStart", changes.InitContainersToStart),
		zap.Ints("containersToStart", changes.ContainersToStart), zap.Int("containersToKill", len(changes.ContainersToKill)),
		zap.Int("containersToReset", len(changes.ContainersToReset)))
	if changes.CreateSandbox && changes.SandboxID != "" {
		m.recorder.Eventf(pod, v1.EventTypeNormal, eventSandboxChanged, "Pod sandbox changed, it will be killed and re-created.")
	}

	// Steps 2 and 3: kill.
	if !m.killForSync(ctx, pod, podStatus, changes, &result) {
		return result
	}
	m.pruneInitContainersBeforeStart(ctx, pod, podStatus)
	m.recordInitContainersFinished(pod, podStatus)
	// In-place resize, before anything (re)starts with the new resources.
	if !changes.CreateSandbox && changes.needsResize() {
		m.doPodResizeAction(ctx, pod, changes, &result)
	}
	if !changes.CreateSandbox && len(changes.InitContainersToStart) == 0 && len(changes.ContainersToStart) == 0 &&
		len(changes.EphemeralContainersToStart) == 0 {
		return result
	}

	// Step 4: sandbox.
	run := &syncRun{m: m, pod: pod, podStatus: podStatus, pullSecrets: pullSecrets, backOff: backOff, result: &result,
		sandboxID: changes.SandboxID, podIPs: podStatus.IPs}
	if !run.prepareSandbox(ctx, changes) {
		return result
	}

	// Ephemeral containers first, as upstream: a debug container starts even
	// when an init container cannot.
	for _, idx := range changes.EphemeralContainersToStart {
		_ = run.start(ctx, (*v1.Container)(&pod.Spec.EphemeralContainers[idx].EphemeralContainerCommon))
	}
	// Step 5: init containers and sidecars, in spec order.
	for _, idx := range changes.InitContainersToStart {
		c := &pod.Spec.InitContainers[idx]
		err := run.start(ctx, c)
		switch {
		case err != nil && !kubecontainer.IsSidecar(c):
			return result
		case err == nil && !kubecontainer.IsSidecar(c):
			m.startup.RecordInitContainerStarted(pod.UID, time.Now())
		}
	}
	// Step 6: regular containers.
	for _, idx := range changes.ContainersToStart {
		_ = run.start(ctx, &pod.Spec.Containers[idx])
	}
	return result
}

// targetNamespace puts an ephemeral container with a targetContainerName
// into that container's PID namespace (when the pod shares none), as
// upstream: the target must exist in the pod's status.
func (r *syncRun) targetNamespace(c *v1.Container, cfg *runtimeapi.ContainerConfig) error {
	ec := ephemeralContainerOf(r.pod, c)
	if ec == nil || ec.TargetContainerName == "" {
		return nil
	}
	target := r.podStatus.FindContainerStatusByName(ec.TargetContainerName)
	if target == nil {
		return fmt.Errorf("unable to find target container %v", ec.TargetContainerName)
	}
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns != nil && ns.Pid == runtimeapi.NamespaceMode_CONTAINER {
		ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, target.ID.ID
	}
	return nil
}

// ephemeralContainerOf returns the ephemeral container whose common part c
// is, nil for any other container.
func ephemeralContainerOf(pod *v1.Pod, c *v1.Container) *v1.EphemeralContainer {
	for i := range pod.Spec.EphemeralContainers {
		if (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon) == c {
			return &pod.Spec.EphemeralContainers[i]
		}
	}
	return nil
}

// recordInitContainersFinished tells the pod start SLI when the pod's init
// containers (not sidecars) that exited did so.
func (m *Manager) recordInitContainersFinished(pod *v1.Pod, podStatus *kubecontainer.PodStatus) {
	for _, c := range pod.Spec.InitContainers {
		if kubecontainer.IsSidecar(&c) {
			continue
		}
		for _, cs := range podStatus.ContainerStatuses {
			if cs.Name == c.Name && cs.State == kubecontainer.StateExited && !cs.FinishedAt.IsZero() {
				m.startup.RecordInitContainerFinished(pod.UID, cs.FinishedAt)
			}
		}
	}
}

// killForSync runs steps 2 and 3 and reports whether the sync may go on.
func (m *Manager) killForSync(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, changes podActions, result *kubecontainer.PodSyncResult) bool {
	if changes.KillPod {
		killResult := m.killPodWithSyncResult(ctx, pod, podStatusToRunningPod(m.runtimeName, podStatus), nil)
		result.AddPodSyncResult(killResult)
		if err := killResult.Error(); err != nil {
			m.logger.Error("kill pod failed", zap.String("pod", formatPod(pod)), zap.Error(err))
			return false
		}
		if changes.CreateSandbox {
			m.purgeInitContainers(ctx, pod, podStatus)
		}
		return true
	}
	for id, info := range changes.ContainersToKill {
		r := &kubecontainer.SyncResult{Action: kubecontainer.KillContainer, Target: info.name}
		result.Add(r)
		req := killRequest{pod: pod, id: id, name: info.name, message: info.message, reason: info.reason}
		if err := m.killContainer(ctx, req); err != nil {
			r.Fail(kubecontainer.ErrKillContainer, err.Error())
			m.logger.Error("kill container failed", zap.String("pod", formatPod(pod)),
				zap.String("container", info.name), zap.String("containerID", id.String()), zap.Error(err))
			return false
		}
	}
	return m.resetContainers(ctx, pod, changes.ContainersToReset, result)
}

// syncRun is the state of one SyncPod past the planning.
type syncRun struct {
	m             *Manager
	pod           *v1.Pod
	podStatus     *kubecontainer.PodStatus
	pullSecrets   []v1.Secret
	backOff       *flowcontrol.Backoff
	result        *kubecontainer.PodSyncResult
	sandboxID     string
	sandboxConfig *runtimeapi.PodSandboxConfig
	podIPs        []string
}

func (r *syncRun) podIP() string {
	if len(r.podIPs) == 0 {
		return ""
	}
	return r.podIPs[0]
}

// prepareSandbox creates the sandbox when the plan says so and builds the
// sandbox config the containers are created with.
func (r *syncRun) prepareSandbox(ctx context.Context, changes podActions) bool {
	if changes.CreateSandbox {
		r.m.metrics.startedPods.Inc()
		id, cfg, ips, ok := r.m.createSandbox(ctx, r.pod, changes.Attempt, r.result)
		if !ok {
			return false
		}
		r.sandboxID, r.sandboxConfig = id, cfg
		if !r.pod.Spec.HostNetwork {
			r.podIPs = ips
		}
	}
	cfgResult := &kubecontainer.SyncResult{Action: kubecontainer.ConfigPodSandbox, Target: r.sandboxID}
	r.result.Add(cfgResult)
	if r.sandboxConfig == nil {
		cfg, err := r.m.generatePodSandboxConfig(r.pod, changes.Attempt)
		if err != nil {
			cfgResult.Fail(kubecontainer.ErrConfigPodSandbox, fmt.Sprintf("GeneratePodSandboxConfig for pod %q failed: %v", formatPod(r.pod), err))
			return false
		}
		r.sandboxConfig = cfg
	}
	return true
}

// createSandbox runs step 4: it returns the new sandbox's ID, config and IPs.
func (m *Manager) createSandbox(ctx context.Context, pod *v1.Pod, attempt uint32, result *kubecontainer.PodSyncResult) (string, *runtimeapi.PodSandboxConfig, []string, bool) {
	r := &kubecontainer.SyncResult{Action: kubecontainer.CreatePodSandbox, Target: formatPod(pod)}
	result.Add(r)
	fail := func(err error) (string, *runtimeapi.PodSandboxConfig, []string, bool) {
		m.metrics.startedPodsErrors.Inc()
		r.Fail(kubecontainer.ErrCreatePodSandbox, fmt.Sprintf("Failed to create pod sandbox: %v", err))
		m.recorder.Eventf(pod, v1.EventTypeWarning, eventFailedCreatePodSandBox, "Failed to create pod sandbox: %v", err)
		m.logger.Error("create pod sandbox failed", zap.String("pod", formatPod(pod)), zap.Error(err))
		return "", nil, nil, false
	}
	cfg, err := m.generatePodSandboxConfig(pod, attempt)
	if err != nil {
		return fail(fmt.Errorf("generate sandbox config: %w", err))
	}
	if dir := cfg.GetLogDirectory(); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fail(fmt.Errorf("create pod log directory: %w", err))
		}
	}
	handler, err := m.runtimeHandler(ctx, pod)
	if err != nil {
		return fail(err)
	}
	release, err := m.starts.acquire(ctx, pod)
	if err != nil {
		// The sync was interrupted (the pod is going away) while waiting for
		// a start slot: nothing failed, no event.
		r.Fail(kubecontainer.ErrCreatePodSandbox, fmt.Sprintf("Failed to create pod sandbox: %v", err))
		return "", nil, nil, false
	}
	id, err := m.runtime.RunPodSandbox(ctx, cfg, handler)
	release()
	if err != nil {
		return fail(err)
	}
	resp, err := m.runtime.PodSandboxStatus(ctx, id, false)
	if err == nil && resp.GetStatus() == nil {
		err = errors.New("the runtime returned no status")
	}
	if err != nil {
		m.recorder.Eventf(pod, v1.EventTypeWarning, eventFailedStatusPodSandBox, "Unable to get pod sandbox status: %v", err)
		result.Fail(fmt.Errorf("pod sandbox status %s: %w", id, err))
		return "", nil, nil, false
	}
	return id, cfg, sandboxIPs(resp.GetStatus(), m.logger), true
}

// runtimeHandler is the CRI runtime handler of the pod's sandbox: its
// RuntimeClass's handler; the default ("") without RuntimeClasses
// (standalone), as upstream.
func (m *Manager) runtimeHandler(ctx context.Context, pod *v1.Pod) (string, error) {
	if m.runtimeClasses == nil {
		return "", nil
	}
	h, err := m.runtimeClasses.LookupRuntimeHandler(ctx, pod.Spec.RuntimeClassName)
	if err == nil && h != "" {
		m.logger.Debug("Running pod with runtime handler", zap.String("pod", formatPod(pod)), zap.String("runtimeHandler", h))
	}
	return h, err
}

// start starts one container and records the result; the returned error is
// the reason (one of the kubecontainer.Err* values) when it did not start.
func (r *syncRun) start(ctx context.Context, c *v1.Container) error {
	res := &kubecontainer.SyncResult{Action: kubecontainer.StartContainer, Target: c.Name}
	r.result.Add(res)
	if inBackOff, msg, err := r.m.doBackOff(r.pod, c, r.podStatus, r.backOff); inBackOff {
		res.Fail(err, msg)
		return err
	}
	typ := containerType(r.pod, c)
	r.m.metrics.startedContainers.WithLabelValues(typ).Inc()
	msg, err := r.startContainer(ctx, c)
	if err != nil {
		r.m.metrics.startedContainersErrs.WithLabelValues(typ, err.Error()).Inc()
		res.Fail(err, msg)
		r.m.logger.Info("container start failed", zap.String("pod", formatPod(r.pod)), zap.String("container", c.Name),
			zap.String("reason", err.Error()), zap.String("message", msg))
		return err
	}
	return nil
}

// startContainer pulls the image if needed, creates and starts the container
// and runs its postStart hook. On failure it returns a message and the reason.
func (r *syncRun) startContainer(ctx context.Context, c *v1.Container) (string, error) {
	m, pod := r.m, r.pod
	imageRef, msg, err := m.ensureImageExists(ctx, pod, c, r.pullSecrets, r.sandboxConfig)
	if err != nil {
		m.recorder.Eventf(pod, v1.EventTypeWarning, eventFailed, "Error: %v", grpcstatus.Convert(err).Message())
		if msg == "" {
			msg = err.Error()
		}
		return msg, imagePullReason(err)
	}

	restartCount := m.nextRestartCount(pod, c, r.podStatus)
	cfg, cleanup, err := m.generateContainerConfig(ctx, c, pod, restartCount, r.podIP(), r.podIPs, imageRef)
	if cleanup != nil {
		defer cleanup()
	}
	if err == nil {
		err = r.targetNamespace(c, cfg)
	}
	if err != nil {
		m.recorder.Eventf(pod, v1.EventTypeWarning, eventFailed, "Error: %v", err)
		return err.Error(), kubecontainer.ErrCreateContainerCfg
	}

	id, msg, err := r.createAndStart(ctx, c, cfg)
	if err != nil {
		return msg, err
	}
	if c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		cid := m.containerID(id)
		msg, err := m.runLifecycleHandler(ctx, pod, c, cid, c.Lifecycle.PostStart, r.podIP())
		if err != nil {
			// The message is not put in the event: it may hold secrets.
			m.recorder.Eventf(pod, v1.EventTypeWarning, eventFailedPostStartHook, "PostStartHook failed for container %s", c.Name)
			req := killRequest{pod: pod, id: cid, name: c.Name, message: "FailedPostStartHook", reason: reasonFailedPostStartHook}
			if kerr := m.killContainer(ctx, req); kerr != nil {
				m.logger.Error("kill container after its postStart hook failed", zap.String("pod", formatPod(pod)),
					zap.String("container", c.Name), zap.Error(kerr))
			}
			return msg, kubecontainer.ErrPostStartHook
		}
	}
	return "", nil
}

// createAndStart creates and starts the container, holding one of the
// start slots (pulls and hooks run outside it). On failure it returns a
// message and the reason.
func (r *syncRun) createAndStart(ctx context.Context, c *v1.Container, cfg *runtimeapi.ContainerConfig) (string, string, error) {
	m, pod := r.m, r.pod
	release, err := m.starts.acquire(ctx, pod)
	if err != nil {
		return "", err.Error(), kubecontainer.ErrCreateContainer
	}
	defer release()
	m.lifecycle.PreCreateContainer(pod, c, cfg)
	m.recordCreated(pod, c)
	id, err := m.runtime.CreateContainer(ctx, r.sandboxID, cfg, r.sandboxConfig)
	if err != nil {
		msg := grpcstatus.Convert(err).Message()
		m.recorder.Eventf(pod, v1.EventTypeWarning, eventFailed, "Error: %s", msg)
		return "", msg, kubecontainer.ErrCreateContainer
	}
	m.lifecycle.PreStartContainer(pod, c, id)
	m.recorder.Eventf(pod, v1.EventTypeNormal, eventCreated, "Created container: %s", c.Name)
	faultinject.Kill("kuberuntime.container.before-start")
	if err := m.runtime.StartContainer(ctx, id); err != nil {
		msg := grpcstatus.Convert(err).Message()
		m.recorder.Eventf(pod, v1.EventTypeWarning, eventFailed, "Error: %s", msg)
		return "", msg, kubecontainer.ErrRunContainer
	}
	m.recorder.Eventf(pod, v1.EventTypeNormal, eventStarted, "Started container %s", c.Name)
	return id, "", nil
}

// imagePullReason maps an image error to its reason sentinel.
func imagePullReason(err error) error {
	for _, reason := range []error{kubecontainer.ErrImagePullBackOff, kubecontainer.ErrImageNeverPull, kubecontainer.ErrInvalidImageName, kubecontainer.ErrImageInspect, kubecontainer.ErrImagePull} {
		if errors.Is(err, reason) {
			return reason
		}
	}
	return kubecontainer.ErrImagePull
}

// nextRestartCount is the restart count of the container's next instance: the
// newest instance's +1, or, when the runtime lost every instance (e.g. after a
// reboot), one more than the highest <n>.log in the container's log directory.
func (m *Manager) nextRestartCount(pod *v1.Pod, c *v1.Container, podStatus *kubecontainer.PodStatus) int {
	if s := podStatus.FindContainerStatusByName(c.Name); s != nil {
		return s.RestartCount + 1
	}
	dir := filepath.Join(buildPodLogsDirectory(m.podLogsDir, pod.Namespace, pod.Name, pod.UID), c.Name)
	return restartCountFromLogDir(dir)
}

// restartCountFromLogDir returns 1 + the highest n of the n.log files in dir,
// or 0.
func restartCountFromLogDir(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	count := 0
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		match := logFileRestartCount.FindStringSubmatch(e.Name())
		if match == nil {
			continue
		}
		if n, err := strconv.Atoi(match[1]); err == nil && n+1 > count {
			count = n + 1
		}
	}
	return count
}

// pruneInitContainersBeforeStart keeps only the newest exited instance of each
// init container (the GC would remove the others later anyway).
func (m *Manager) pruneInitContainersBeforeStart(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) {
	for i := range pod.Spec.InitContainers {
		count := 0
		for _, s := range podStatus.ContainerStatusesByName(pod.Spec.InitContainers[i].Name) {
			if s.State != kubecontainer.StateExited && s.State != kubecontainer.StateUnknown {
				continue
			}
			count++
			if count == 1 {
				continue
			}
			if err := m.removeContainer(ctx, s.ID.ID); err != nil {
				m.logger.Warn("remove old init container failed", zap.String("pod", formatPod(pod)),
					zap.String("container", s.Name), zap.String("containerID", s.ID.ID), zap.Error(err))
			}
		}
	}
}

// purgeInitContainers removes every instance of the init containers (a new
// sandbox runs them all again).
func (m *Manager) purgeInitContainers(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) {
	for i := range pod.Spec.InitContainers {
		for _, s := range podStatus.ContainerStatusesByName(pod.Spec.InitContainers[i].Name) {
			if err := m.removeContainer(ctx, s.ID.ID); err != nil {
				m.logger.Warn("remove init container failed", zap.String("pod", formatPod(pod)),
					zap.String("container", s.Name), zap.String("containerID", s.ID.ID), zap.Error(err))
			}
		}
	}
}
