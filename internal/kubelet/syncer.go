package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/apistatus"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
)

// Event reasons the kubelet records itself (upstream values); the runtime
// manager records the container ones (Failed, BackOff, Killing, ...).
const (
	eventFailedMount     = "FailedMount"
	eventFailedDRA       = "FailedPrepareDynamicResources"
	eventNetworkNotReady = "NetworkNotReady"
	eventFailedKillPod   = "FailedKillPod"
	// eventFailedNodeDeclaredFeaturesCheck: a pod update needs node
	// features the node does not declare.
	eventFailedNodeDeclaredFeaturesCheck = "FailedNodeDeclaredFeaturesCheck"
	networkNotReadyMsg                   = "network is not ready"
)

// errNoDRA is why a pod with resource claims waits.
var errNoDRA = errors.New("dynamic resource allocation (spec.resourceClaims) is not supported by this kubelet: " +
	"no DRA driver can register and Docker Engine 20.10 cannot apply the CDI devices drivers prepare")

// podSyncer implements podworkers.SyncFuncs: the steps the pod workers run for
// each pod (upstream SyncPod, SyncTerminatingPod, SyncTerminatedPod).
type podSyncer struct {
	runtime  Runtime
	volumes  VolumeManager
	prober   Prober
	status   *status.Manager
	helper   RuntimeHelper
	gen      *apistatus.Generator
	reasons  *apistatus.ReasonCache
	state    RuntimeState
	recorder record.EventRecorder
	mirrors  *mirrorKeeper
	secrets  SecretGetter
	objects  PodObjects // nil: standalone
	cgroups  PodCgroups
	cpus     CPUManager
	memory   MemoryManager
	resize   *resizer // nil: no in-place resize
	pleg     PLEG
	// activePods are the pods the QoS cgroups are sized for.
	activePods func() []*v1.Pod
	backOff    *flowcontrol.Backoff
	metrics    *syncMetrics
	logger     *zap.Logger
	// requestGC asks for an early container GC (a pod terminated).
	requestGC func()
	// requeue asks the pod workers for another sync of the pod (after the
	// reset of a RestartAllContainers, which no PLEG event follows).
	requeue func(uid k8stypes.UID)
	// rules: NoRestartAll is the RestartAllContainersOnContainerExits gate off.
	rules kubecontainer.RestartRules

	// probeCtx is the kubelet's run context: probe workers outlive a single sync.
	mu       sync.Mutex
	probeCtx context.Context
}

var _ podworkers.SyncFuncs = (*podSyncer)(nil)

// setProbeContext sets the context probe workers run under (Run's ctx).
func (s *podSyncer) setProbeContext(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probeCtx = ctx
}

func (s *podSyncer) probeContext(fallback context.Context) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.probeCtx == nil {
		return fallback
	}
	return s.probeCtx
}

// SyncPod makes the pod run as specified:
//  1. compute the API status and store it; a terminal pod stops here;
//  2. refuse pods off the host network while the network is not ready;
//  3. register the pod with the configMap and secret managers, and keep a
//     static pod's API mirror pod current;
//  4. make the pod's cgroup (a pod whose containers run without one, after an
//     upgrade or a crash, is killed first, as upstream does), create the pod
//     directories and set up the volumes (FailedMount event);
//  5. start the probe workers;
//  6. let the runtime manager create the sandbox and (re)start containers with
//     the crash-loop back-off, remembering why containers failed to start; a
//     pod whose status says AllContainersRestarting has all its containers
//     removed instead, and is synced again at once to start over.
//
// Only failures other than back-offs are returned, so a container in back-off is
// retried at the next resync rather than after the error back-off.
func (s *podSyncer) SyncPod(ctx context.Context, updateType podworkers.UpdateType, pod *v1.Pod, ps *kubecontainer.PodStatus) (bool, error) {
	if ps == nil {
		ps = &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	seen := firstSeen(pod)
	if updateType == podworkers.SyncPodCreate && !seen.IsZero() {
		s.metrics.workerStart.Observe(time.Since(seen).Seconds())
	}
	// Everything below works on what the kubelet allocated: a resize not
	// accepted yet does not reach the runtime.
	pod = s.resize.allocatedPod(pod)
	s.beforeRuntimeSync(pod, ps)
	apiStatus := s.gen.Generate(pod, ps, false)
	// The containers get the pod IPs of the API status (upstream #24576): a
	// host-network pod's are the node's, which no sandbox reports.
	ps = withStatusIPs(ps, &apiStatus)
	existing, known := s.status.GetPodStatus(pod.UID)
	s.metrics.observePodStart(seen, existing, known, apiStatus.Phase)
	s.status.SetPodStatus(pod, apiStatus)
	if status.IsTerminal(apiStatus.Phase) {
		return true, nil
	}
	if err := s.state.NetworkError(); err != nil && !pod.Spec.HostNetwork {
		s.recorder.Eventf(pod, v1.EventTypeWarning, eventNetworkNotReady, "%s: %v", networkNotReadyMsg, err)
		return false, fmt.Errorf("%s: %w", networkNotReadyMsg, err)
	}
	// The configMaps and secrets the pod references are kept from now on
	// (upstream registers a pod at each sync; the pod workers sync no pod
	// whose termination was requested): a terminal or rejected pod never is.
	if s.objects != nil {
		s.objects.RegisterPod(pod)
	}
	s.mirrors.sync(ctx, pod)
	if err := s.ensurePodCgroup(ctx, pod, ps); err != nil {
		return false, err
	}
	if err := s.makePodDirs(pod.UID); err != nil {
		return false, err
	}
	if len(pod.Spec.ResourceClaims) > 0 {
		// Upstream prepares the claims through their DRA drivers first;
		// without that the pod must not run as if it had its devices.
		s.recorder.Eventf(pod, v1.EventTypeWarning, eventFailedDRA, "Failed to prepare dynamic resources: %v", errNoDRA)
		return false, fmt.Errorf("prepare dynamic resources of pod %s/%s: %w", pod.Namespace, pod.Name, errNoDRA)
	}
	infos, err := s.volumes.MountVolumes(ctx, pod)
	if err != nil {
		s.recorder.Eventf(pod, v1.EventTypeWarning, eventFailedMount, "Unable to attach or mount volumes: %v", err)
		return false, fmt.Errorf("mount volumes of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	s.helper.SetVolumes(pod.UID, infos)
	s.prober.AddPod(s.probeContext(ctx), pod)

	restartingAll := s.restartingAllContainers(&apiStatus)
	result := s.runtime.SyncPod(ctx, pod, ps, s.pullSecrets(ctx, pod), s.backOff, restartingAll)
	if len(result.SyncResults) > 0 {
		s.podChanged(pod)
	}
	s.reasons.Update(pod.UID, result)
	s.afterRuntimeSync(pod, result)
	if restartingAll && result.Error() == nil && removedContainers(result) && s.requeue != nil {
		// Removals bring no PLEG event: sync again now to start the pod over
		// (that sync sees no container left and turns the condition off).
		s.requeue(pod.UID)
	}
	err = result.Error()
	if err == nil {
		return false, nil
	}
	if result.SyncError != nil {
		return false, err
	}
	for _, r := range result.SyncResults {
		if r.Error != nil && !errors.Is(r.Error, kubecontainer.ErrCrashLoopBackOff) && !errors.Is(r.Error, kubecontainer.ErrImagePullBackOff) {
			return false, err
		}
	}
	return false, nil
}

// withStatusIPs returns ps with the pod IPs of st (a copy when they differ:
// ps may be the runtime cache's).
func withStatusIPs(ps *kubecontainer.PodStatus, st *v1.PodStatus) *kubecontainer.PodStatus {
	ips := make([]string, 0, len(st.PodIPs))
	for _, ip := range st.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && st.PodIP != "" {
		ips = append(ips, st.PodIP)
	}
	if slices.Equal(ips, ps.IPs) || (len(ips) == 0 && len(ps.IPs) == 0) {
		return ps
	}
	c := *ps
	c.IPs = ips
	return &c
}

// restartingAllContainers reports whether the pod's new status has the
// AllContainersRestarting condition True (with the gate on).
func (s *podSyncer) restartingAllContainers(st *v1.PodStatus) bool {
	return !s.rules.NoRestartAll && kubecontainer.PodConditionTrue(st.Conditions, v1.AllContainersRestarting)
}

// removedContainers reports whether the sync removed a container.
func removedContainers(result kubecontainer.PodSyncResult) bool {
	for _, r := range result.SyncResults {
		if r.Action == kubecontainer.RemoveContainer && r.Error == nil {
			return true
		}
	}
	return false
}

// SyncTerminatingPod stops the probes and every container of the pod within
// gracePeriod, checks that nothing runs any more and stores the status with the
// containers terminated.
func (s *podSyncer) SyncTerminatingPod(ctx context.Context, pod *v1.Pod, ps *kubecontainer.PodStatus, gracePeriod *int64) error {
	orphan := isPlaceholder(pod)
	if !orphan {
		s.status.SetPodStatus(pod, s.gen.Generate(pod, ps, false))
	}
	s.prober.RemovePod(pod)
	err := s.runtime.KillPod(ctx, pod, nil, gracePeriod)
	s.podChanged(pod)
	if err != nil {
		s.recorder.Eventf(pod, v1.EventTypeWarning, eventFailedKillPod, "error killing pod: %v", err)
		return fmt.Errorf("kill pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	stopped, err := s.runtime.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		return fmt.Errorf("status of killed pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if len(stopped.IPs) == 0 && ps != nil {
		stopped.IPs = ps.IPs
	}
	var running []string
	for _, c := range stopped.ContainerStatuses {
		if c.State == kubecontainer.StateRunning {
			running = append(running, c.Name)
		}
	}
	if len(running) > 0 {
		return fmt.Errorf("detected running containers %v of pod %s/%s after a successful KillPod", running, pod.Namespace, pod.Name)
	}
	if !orphan {
		s.status.SetPodStatus(pod, s.gen.Generate(pod, stopped, true))
	}
	return nil
}

// SyncTerminatedPod releases what the stopped pod holds: its volumes are torn
// down (then its configMaps and secrets are no more kept) and its status becomes final (containers without a terminated state are
// marked ContainerStatusUnknown). The pod directory itself is removed by
// housekeeping once the pod is no longer desired.
func (s *podSyncer) SyncTerminatedPod(ctx context.Context, pod *v1.Pod, ps *kubecontainer.PodStatus) error {
	orphan := isPlaceholder(pod)
	if !orphan {
		s.status.SetPodStatus(pod, s.gen.Generate(pod, ps, true))
	}
	if err := s.volumes.UnmountVolumes(ctx, pod.UID); err != nil {
		return fmt.Errorf("unmount volumes of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	// Its volumes gone, the pod needs its configMaps and secrets no more.
	if s.objects != nil {
		s.objects.UnregisterPod(pod)
	}
	if err := s.cgroups.DestroyPod(pod.UID); err != nil {
		return fmt.Errorf("remove the cgroup of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if err := s.cgroups.UpdateQoS(s.activePods()); err != nil {
		s.logger.Error("update the QoS cgroups", zap.Error(err))
	}
	s.runtime.ForgetPod(pod)
	if err := s.cpus.RemovePod(string(pod.UID)); err != nil {
		s.logger.Error("release the CPUs of the pod", zap.String("pod", podRef(pod)), zap.Error(err))
	}
	if err := s.memory.RemovePod(string(pod.UID)); err != nil {
		s.logger.Error("release the memory of the pod", zap.String("pod", podRef(pod)), zap.Error(err))
	}
	s.helper.ForgetVolumes(pod.UID)
	if !orphan {
		s.status.TerminatePod(pod)
	}
	if s.requestGC != nil {
		s.requestGC()
	}
	return nil
}

// podChanged tells the PLEG that this sync acted on the pod in the runtime,
// so that the worker's next sync waits for a status read after the action
// (not one the action's event has yet to refresh).
func (s *podSyncer) podChanged(pod *v1.Pod) {
	s.pleg.PodChanged(pod.UID, pod.Name, pod.Namespace)
}

// ensurePodCgroup makes the pod's cgroup unless it exists. Containers of the
// pod that run without it (a kubelet upgraded from one that made none, or a
// cgroup removed behind its back) are killed first, so that every container
// of the pod runs in its cgroup, as upstream does.
func (s *podSyncer) ensurePodCgroup(ctx context.Context, pod *v1.Pod, ps *kubecontainer.PodStatus) error {
	if s.cgroups.PodCgroupExists(pod) {
		return nil
	}
	if hasRunningContainers(ps) {
		s.logger.Info("killing the pod's containers: they run without the pod's cgroup",
			zap.String("pod", pod.Namespace+"/"+pod.Name))
		err := s.runtime.KillPod(ctx, pod, nil, nil)
		s.podChanged(pod)
		if err != nil {
			return fmt.Errorf("kill pod %s/%s to move it into its cgroup: %w", pod.Namespace, pod.Name, err)
		}
	}
	return s.cgroups.EnsurePod(pod, s.activePods())
}

// hasRunningContainers reports whether a container or sandbox of the pod runs.
func hasRunningContainers(ps *kubecontainer.PodStatus) bool {
	for _, c := range ps.ContainerStatuses {
		if c.State == kubecontainer.StateRunning {
			return true
		}
	}
	for _, sb := range ps.SandboxStatuses {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			return true
		}
	}
	return false
}

// makePodDirs creates the pod's directory and its volumes and plugins dirs.
func (s *podSyncer) makePodDirs(uid k8stypes.UID) error {
	dir := s.helper.GetPodDir(uid)
	for _, d := range []string{dir, filepath.Join(dir, "volumes"), filepath.Join(dir, "plugins")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return fmt.Errorf("create pod directory: %w", err)
		}
	}
	return nil
}

// isPlaceholder reports whether pod only stands for an orphaned runtime pod
// (the pod workers build one without a spec).
func isPlaceholder(pod *v1.Pod) bool {
	return len(pod.Spec.Containers) == 0 && len(pod.Spec.InitContainers) == 0
}
