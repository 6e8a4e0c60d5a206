package kubelet

import (
	"context"
	"fmt"

	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/cpumanager"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// UpdateContainerCPUs gives the running container name of pod podUID the
// cpuset cpus (the CPU manager's reconcile: cpumanager.UpdateFunc). A
// container with no running instance in the pod status cache is
// cpumanager.ErrContainerNotRunning.
func (k *Kubelet) UpdateContainerCPUs(ctx context.Context, podUID, name string, cpus cpuset.CPUSet) error {
	if k.deps.cache == nil {
		return fmt.Errorf("container %s of pod %s: %w", name, podUID, cpumanager.ErrContainerNotRunning)
	}
	ps, err := k.deps.cache.Get(k8stypes.UID(podUID))
	if err != nil || ps == nil {
		return fmt.Errorf("container %s of pod %s: %w", name, podUID, cpumanager.ErrContainerNotRunning)
	}
	for _, c := range ps.ContainerStatuses {
		if c.Name == name && c.State == kubecontainer.StateRunning {
			return k.deps.runtime.UpdateContainerResources(ctx, c.ID.ID, &runtimeapi.ContainerResources{
				Linux: &runtimeapi.LinuxContainerResources{CpusetCpus: cpus.String()}})
		}
	}
	return fmt.Errorf("container %s of pod %s: %w", name, podUID, cpumanager.ErrContainerNotRunning)
}
