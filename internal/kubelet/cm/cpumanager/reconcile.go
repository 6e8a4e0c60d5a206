package cpumanager

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// UpdateFunc applies a cpuset to the running container of a pod (the
// kubelet's UpdateContainerResources with cpuset_cpus). It returns an error
// wrapping ErrContainerNotRunning when the container has no running
// instance.
type UpdateFunc func(ctx context.Context, podUID, containerName string, cpus cpuset.CPUSet) error

// Reconcile is upstream's reconcileState, meant to run every
// ReconcilePeriod: it drops stale assignments, then gives every container of
// the active pods (init containers first) the cpuset it should have - its
// exclusive CPUs or the current shared pool - when that differs from what it
// was last given. A failed update is retried on the next call. It does
// nothing for the none policy.
func (m *Manager) Reconcile(ctx context.Context, activePods func() []*v1.Pod, update UpdateFunc) {
	if m.policy.name() == PolicyNone {
		return
	}
	type want struct {
		podUID, name string
		cpus         cpuset.CPUSet
	}
	var todo []want
	m.mu.Lock()
	if m.st == nil {
		m.mu.Unlock()
		return
	}
	if activePods != nil {
		m.activePods = activePods
	}
	if m.removeStaleLocked() {
		m.persistLocked()
	}
	pods := m.activePods
	m.mu.Unlock()
	if pods == nil {
		return
	}
	for _, pod := range pods() {
		uid := string(pod.UID)
		names := make([]string, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
		for _, c := range pod.Spec.InitContainers {
			names = append(names, c.Name)
		}
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
		m.mu.Lock()
		for _, name := range names {
			set := m.policy.affinity(m.st, uid, name)
			last, _ := m.lastUpdate.get(uid, name)
			if set.IsEmpty() || set.Equals(last) {
				continue
			}
			todo = append(todo, want{podUID: uid, name: name, cpus: set})
		}
		m.mu.Unlock()
	}
	for _, w := range todo {
		if err := ctx.Err(); err != nil {
			return
		}
		log := m.log.With(zap.String("podUID", w.podUID), zap.String("containerName", w.name), zap.Stringer("cpuSet", w.cpus))
		if err := update(ctx, w.podUID, w.name, w.cpus); err != nil {
			if errors.Is(err, ErrContainerNotRunning) {
				log.Debug("skipping container; not running")
			} else {
				log.Error("failed to update container", zap.Error(err))
			}
			continue
		}
		m.mu.Lock()
		m.lastUpdate.set(w.podUID, w.name, w.cpus)
		m.mu.Unlock()
	}
}

// PodStatuses gives a pod's last known status (the kubelet's pod status
// cache, *kubecontainer.Cache).
type PodStatuses interface {
	Get(uid k8stypes.UID) (*kubecontainer.PodStatus, error)
}

// ContainerUpdater sets a container's resources (the CRI runtime).
type ContainerUpdater interface {
	UpdateContainerResources(ctx context.Context, containerID string, r *runtimeapi.ContainerResources) error
}

// updateContainer gives the running container name of pod podUID the
// cpuset cpus (the reconcile loop's UpdateFunc). A container with no running
// instance in the pod status cache is ErrContainerNotRunning.
func (m *Manager) updateContainer(ctx context.Context, podUID, name string, cpus cpuset.CPUSet) error {
	ps, err := m.opts.Statuses.Get(k8stypes.UID(podUID))
	if err != nil || ps == nil {
		return fmt.Errorf("container %s of pod %s: %w", name, podUID, ErrContainerNotRunning)
	}
	for _, c := range ps.ContainerStatuses {
		if c.Name == name && c.State == kubecontainer.StateRunning {
			return m.opts.Containers.UpdateContainerResources(ctx, c.ID.ID, &runtimeapi.ContainerResources{
				Linux: &runtimeapi.LinuxContainerResources{CpusetCpus: cpus.String()}})
		}
	}
	return fmt.Errorf("container %s of pod %s: %w", name, podUID, ErrContainerNotRunning)
}

// SharedPool is the shared pool (the default set): the CPUs of containers
// without exclusive CPUs, reserved CPUs included. Empty for policy none.
func (m *Manager) SharedPool() cpuset.CPUSet {
	return m.DefaultCPUSet()
}

// DefaultCPUSet is the state's default set (the shared pool).
func (m *Manager) DefaultCPUSet() cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return cpuset.New()
	}
	return m.st.defaultSet.Clone()
}

// Assignments is a copy of the exclusive assignments: pod UID -> container
// name -> CPUs.
func (m *Manager) Assignments() map[string]map[string]cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.st == nil {
		return map[string]map[string]cpuset.CPUSet{}
	}
	return m.st.assignments.clone()
}

// Topology is the CPU topology the manager works with.
func (m *Manager) Topology() *Topology { return m.topo }

// AllocatableCPUs are the CPUs the policy may give exclusively: with static,
// every CPU but the reserved ones; with none, none (upstream's
// GetAllocatableCPUs, the PodResources API's allocatable cpu_ids).
func (m *Manager) AllocatableCPUs() cpuset.CPUSet {
	if p, ok := m.policy.(*staticPolicy); ok {
		return m.topo.CPUDetails.CPUs().Difference(p.reserved)
	}
	return cpuset.New()
}

// Policy is the name of the active policy.
func (m *Manager) Policy() string { return m.policy.name() }
