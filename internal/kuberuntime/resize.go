package kuberuntime

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	grpcstatus "google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// In-place resize, the runtime manager's half (upstream's
// computePodResizeAction and doPodResizeAction): the pod SyncPod gets carries
// the resources the kubelet allocated; what was last applied to each
// container is in the actuated state (actuated_pods_state in the root
// directory, written when a container is created and after each update). A
// running container whose allocated cpu or memory differs from its actuated
// values is updated in place with UpdateContainerResources, or restarted when
// its resizePolicy says RestartContainer for a resource that changed. A
// container's values are its effective ones: without a limit of its own it
// runs under the pod-level limit (kubecontainer.EffectiveResources), so a
// resize of the pod-level resources alone resizes (or restarts) it too. The
// pod-level resources last applied to the pod cgroup are in the actuated
// state as well; when the allocated ones differ, the pod cgroup is resized.
// All memory work comes before any cpu work, and within each the pod cgroup
// is raised before the containers and lowered after them.

// PodCgroupResizer reads and writes a pod's cgroup for a resize
// (*cm.Manager). Values left nil are not written.
type PodCgroupResizer interface {
	// PodCgroupResources returns the pod cgroup's current values and memory
	// usage.
	PodCgroupResources(pod *v1.Pod) (kubecontainer.PodCgroupResources, error)
	// DesiredPodCgroupResources returns the values the pod's resources give
	// its cgroup.
	DesiredPodCgroupResources(pod *v1.Pod) kubecontainer.PodCgroupResources
	// ResizePodCgroup writes the values set in r.
	ResizePodCgroup(pod *v1.Pod, r kubecontainer.PodCgroupResources) error
}

// Event reason and message of a restart a resize requires (upstream's).
const resizeRestartMessage = "Container %s resize requires restart"

// resizeValues are a container's cpu and memory as integers.
type resizeValues struct {
	memLimit, memRequest int64 // bytes
	cpuLimit, cpuRequest int64 // millicores
}

func valuesOf(r v1.ResourceRequirements) resizeValues {
	return resizeValues{
		memLimit: r.Limits.Memory().Value(), memRequest: r.Requests.Memory().Value(),
		cpuLimit: r.Limits.Cpu().MilliValue(), cpuRequest: r.Requests.Cpu().MilliValue(),
	}
}

// containerToUpdate is a running container resized in place.
type containerToUpdate struct {
	container *v1.Container
	id        kubecontainer.ContainerID
	desired   v1.ResourceRequirements // allocated
	current   v1.ResourceRequirements // actuated
}

// resizePolicy is the container's policy for res: NotRequired unless it says
// RestartContainer.
func resizePolicy(c *v1.Container, res v1.ResourceName) v1.ResourceResizeRestartPolicy {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == res {
			return p.RestartPolicy
		}
	}
	return v1.NotRequired
}

// initActuated records the allocated resources of a pod that has no actuated
// entry yet (created before this kubelet kept one): they are what its
// containers were created with.
func (m *Manager) initActuated(pod *v1.Pod) {
	if m.actuated == nil {
		return
	}
	if _, ok := m.actuated.Get(pod.UID); ok {
		return
	}
	if err := m.actuated.Set(pod.UID, kubecontainer.ResourceInfoForPod(pod)); err != nil {
		m.logger.Error("record the actuated resources of the pod", zap.String("pod", formatPod(pod)), zap.Error(err))
	}
}

// planResize plans the resize of running container c (status) and reports
// whether it is restarted for it (then it is killed and started by the plan).
func (m *Manager) planResize(pod *v1.Pod, idx int, c *v1.Container, status *kubecontainer.ContainerStatus, changes *podActions, initContainer bool) bool {
	if m.actuated == nil {
		return false
	}
	current, ok := m.actuatedResources(pod.UID, c.Name)
	if !ok {
		return false
	}
	desired := kubecontainer.EffectiveResources(pod.Spec.Resources, c.Resources)
	want, have := valuesOf(desired), valuesOf(current)
	if want == have {
		return false
	}
	memChanged := want.memLimit != have.memLimit || want.memRequest != have.memRequest
	cpuChanged := want.cpuLimit != have.cpuLimit || want.cpuRequest != have.cpuRequest
	if (memChanged && resizePolicy(c, v1.ResourceMemory) == v1.RestartContainer) ||
		(cpuChanged && resizePolicy(c, v1.ResourceCPU) == v1.RestartContainer) {
		changes.ContainersToKill[status.ID] = containerToKillInfo{name: c.Name, container: c,
			message: fmt.Sprintf(resizeRestartMessage, c.Name), reason: reasonUnknown}
		if initContainer {
			changes.InitContainersToStart = append(changes.InitContainersToStart, idx)
		} else {
			changes.ContainersToStart = append(changes.ContainersToStart, idx)
		}
		changes.UpdatePodResources = true
		return true
	}
	u := containerToUpdate{container: c, id: status.ID, desired: desired, current: current}
	if changes.ContainersToUpdate == nil {
		changes.ContainersToUpdate = map[v1.ResourceName][]containerToUpdate{}
	}
	mark := func(res v1.ResourceName, decrease bool) {
		if decrease { // decreases first
			changes.ContainersToUpdate[res] = append([]containerToUpdate{u}, changes.ContainersToUpdate[res]...)
		} else {
			changes.ContainersToUpdate[res] = append(changes.ContainersToUpdate[res], u)
		}
	}
	if memChanged {
		if want.memLimit != have.memLimit {
			mark(v1.ResourceMemory, want.memLimit < have.memLimit)
		} else {
			mark(v1.ResourceMemory, want.memRequest < have.memRequest)
		}
	}
	if cpuChanged {
		if want.cpuLimit != have.cpuLimit {
			mark(v1.ResourceCPU, want.cpuLimit < have.cpuLimit)
		} else {
			mark(v1.ResourceCPU, want.cpuRequest < have.cpuRequest)
		}
	}
	return false
}

// actuatedResources is what container name of the pod was last given: its
// record, with the pod-level limits last applied filled in where it has none
// (a record made before this kubelet recorded effective limits).
func (m *Manager) actuatedResources(uid k8stypes.UID, name string) (v1.ResourceRequirements, bool) {
	r, ok := m.actuated.Container(uid, name)
	if !ok {
		return r, false
	}
	podLevel, _ := m.actuated.PodLevel(uid)
	return kubecontainer.EffectiveResources(podLevel, r), true
}

// podLevelResizeNeeded reports whether the pod's allocated pod-level cpu and
// memory differ from those last applied to its cgroup (a pod without an
// actuated entry yet has nothing applied to compare with).
func (m *Manager) podLevelResizeNeeded(pod *v1.Pod) bool {
	if m.actuated == nil {
		return false
	}
	actuated, ok := m.actuated.PodLevel(pod.UID)
	if !ok {
		return false
	}
	var want, have v1.ResourceRequirements
	if pod.Spec.Resources != nil {
		want = *pod.Spec.Resources
	}
	if actuated != nil {
		have = *actuated
	}
	return valuesOf(want) != valuesOf(have)
}

// needsResize reports whether SyncPod has resize work.
func (p *podActions) needsResize() bool {
	return len(p.ContainersToUpdate) > 0 || p.UpdatePodResources || p.UpdatePodLevelResources
}

// doPodResizeAction carries out the plan's resize: memory (pod cgroup up,
// containers, pod cgroup down), then cpu the same way. A memory limit is
// never set below the pod's current usage. The first failure ends it; the
// next sync tries again.
func (m *Manager) doPodResizeAction(ctx context.Context, pod *v1.Pod, changes podActions, result *kubecontainer.PodSyncResult) {
	r := &kubecontainer.SyncResult{Action: kubecontainer.ResizePodInPlace, Target: string(pod.UID)}
	result.Add(r)
	if err := m.resizePod(ctx, pod, changes); err != nil {
		m.logger.Error("resize pod in place", zap.String("pod", formatPod(pod)), zap.Error(err))
		r.Fail(kubecontainer.ErrResizePodInPlace, err.Error())
	}
}

func (m *Manager) resizePod(ctx context.Context, pod *v1.Pod, changes podActions) error {
	var cur, want kubecontainer.PodCgroupResources
	if m.podCgroups != nil {
		var err error
		if cur, err = m.podCgroups.PodCgroupResources(pod); err != nil {
			return fmt.Errorf("read the pod cgroup: %w", err)
		}
		want = m.podCgroups.DesiredPodCgroupResources(pod)
	}
	// What each phase raises on the pod cgroup before its containers and
	// lowers after them.
	var memUp, memDown, cpuUp, cpuDown kubecontainer.PodCgroupResources
	if want.Memory != nil && cur.Memory != nil {
		switch {
		case limitLess(*cur.Memory, *want.Memory):
			memUp.Memory = want.Memory
		case limitLess(*want.Memory, *cur.Memory):
			if *want.Memory < cur.MemoryUsage {
				return fmt.Errorf("cannot decrease memory limits: attempting to set pod memory limit (%d) below current usage (%d)", *want.Memory, cur.MemoryUsage)
			}
			memDown.Memory = want.Memory
		}
	}
	if want.CPUQuota != nil && cur.CPUQuota != nil && *want.CPUQuota != *cur.CPUQuota {
		if limitLess(*cur.CPUQuota, *want.CPUQuota) {
			cpuUp.CPUQuota, cpuUp.CPUPeriod = want.CPUQuota, want.CPUPeriod
		} else {
			cpuDown.CPUQuota, cpuDown.CPUPeriod = want.CPUQuota, want.CPUPeriod
		}
	}
	if want.CPUShares != nil && cur.CPUShares != nil && *want.CPUShares != *cur.CPUShares {
		if *want.CPUShares > *cur.CPUShares {
			cpuUp.CPUShares = want.CPUShares
		} else {
			cpuDown.CPUShares = want.CPUShares
		}
	}
	for _, ph := range []struct {
		res      v1.ResourceName
		up, down kubecontainer.PodCgroupResources
	}{{v1.ResourceMemory, memUp, memDown}, {v1.ResourceCPU, cpuUp, cpuDown}} {
		if err := m.resizePodCgroup(pod, ph.res, ph.up); err != nil {
			return err
		}
		if err := m.updateContainers(ctx, pod, changes.ContainersToUpdate[ph.res], ph.res); err != nil {
			return err
		}
		if err := m.resizePodCgroup(pod, ph.res, ph.down); err != nil {
			return err
		}
		if changes.UpdatePodLevelResources {
			if err := m.recordPodLevel(pod, ph.res); err != nil {
				return err
			}
		}
	}
	return nil
}

// recordPodLevel records res of the pod's allocated pod-level resources as
// actuated, keeping the other resource's actuated values.
func (m *Manager) recordPodLevel(pod *v1.Pod, res v1.ResourceName) error {
	actuated, _ := m.actuated.PodLevel(pod.UID)
	var cur, allocated v1.ResourceRequirements
	if actuated != nil {
		cur = *actuated
	}
	if pod.Spec.Resources != nil {
		allocated = *pod.Spec.Resources
	}
	next := mixResources(cur, allocated, res)
	var rec *v1.ResourceRequirements
	if len(next.Requests) > 0 || len(next.Limits) > 0 {
		rec = &next
	}
	if err := m.actuated.SetPodLevel(pod.UID, rec); err != nil {
		return fmt.Errorf("record the pod-level %s: %w", res, err)
	}
	return nil
}

// resizePodCgroup writes r into the pod cgroup unless it sets nothing.
func (m *Manager) resizePodCgroup(pod *v1.Pod, res v1.ResourceName, r kubecontainer.PodCgroupResources) error {
	if r == (kubecontainer.PodCgroupResources{}) {
		return nil
	}
	if err := m.podCgroups.ResizePodCgroup(pod, r); err != nil {
		return fmt.Errorf("set the pod cgroup's %s: %w", res, err)
	}
	return nil
}

// limitLess reports a < b for limits where a negative value (-1) is none,
// i.e. unlimited.
func limitLess(a, b int64) bool {
	return unlimitedIfNegative(a) < unlimitedIfNegative(b)
}

func unlimitedIfNegative(v int64) int64 {
	if v < 0 {
		return 1<<63 - 1
	}
	return v
}

// updateContainers gives each container the allocated value of res, keeping
// the other resource as actuated, and records what it applied.
func (m *Manager) updateContainers(ctx context.Context, pod *v1.Pod, list []containerToUpdate, res v1.ResourceName) error {
	for _, u := range list {
		current, _ := m.actuatedResources(pod.UID, u.container.Name)
		next := mixResources(current, u.desired, res)
		c := *u.container
		c.Resources = next
		lr := m.containerResources(pod, &c)
		if err := m.runtime.UpdateContainerResources(ctx, u.id.ID, &runtimeapi.ContainerResources{Linux: lr}); err != nil {
			return fmt.Errorf("update the %s of container %s: %s", res, u.container.Name, grpcstatus.Convert(err).Message())
		}
		if err := m.actuated.SetContainer(pod.UID, u.container.Name, next); err != nil {
			return fmt.Errorf("record the resources of container %s: %w", u.container.Name, err)
		}
	}
	return nil
}

// mixResources is current with res's request and limit taken from desired.
func mixResources(current, desired v1.ResourceRequirements, res v1.ResourceName) v1.ResourceRequirements {
	out := *current.DeepCopy()
	set := func(dst *v1.ResourceList, src v1.ResourceList) {
		q, ok := src[res]
		switch {
		case ok && *dst == nil:
			*dst = v1.ResourceList{res: q.DeepCopy()}
		case ok:
			(*dst)[res] = q.DeepCopy()
		case *dst != nil:
			delete(*dst, res)
		}
	}
	set(&out.Requests, desired.Requests)
	set(&out.Limits, desired.Limits)
	return out
}

// IsPodResizeInProgress reports whether a running container of the
// (allocated) pod has not been given its allocated cpu and memory yet, or
// the pod cgroup its allocated pod-level ones (upstream compares the
// allocation with the actuated state, not with what the runtime reports).
func (m *Manager) IsPodResizeInProgress(pod *v1.Pod, podStatus *kubecontainer.PodStatus) bool {
	if m.actuated == nil || podStatus == nil {
		return false
	}
	if pod.Spec.Resources != nil && m.podLevelResizeNeeded(pod) {
		return true
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			s := podStatus.FindContainerStatusByName(c.Name)
			if s == nil || s.State != kubecontainer.StateRunning {
				continue
			}
			current, ok := m.actuatedResources(pod.UID, c.Name)
			if !ok {
				continue
			}
			if valuesOf(kubecontainer.EffectiveResources(pod.Spec.Resources, c.Resources)) != valuesOf(current) {
				return true
			}
		}
	}
	return false
}

// recordCreated records the (effective) resources a container is created
// with.
func (m *Manager) recordCreated(pod *v1.Pod, c *v1.Container) {
	if m.actuated == nil {
		return
	}
	if err := m.actuated.SetContainer(pod.UID, c.Name, kubecontainer.EffectiveResources(pod.Spec.Resources, c.Resources)); err != nil {
		m.logger.Error("record the actuated resources of a container", zap.String("pod", formatPod(pod)),
			zap.String("container", c.Name), zap.Error(err))
	}
}

// ForgetPod drops the actuated resources of a pod whose containers are gone.
func (m *Manager) ForgetPod(pod *v1.Pod) {
	if m.actuated == nil {
		return
	}
	if err := m.actuated.Remove(pod.UID); err != nil {
		m.logger.Error("forget the actuated resources of the pod", zap.String("pod", formatPod(pod)), zap.Error(err))
	}
}
