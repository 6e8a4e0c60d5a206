package cpumanager

import (
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PreCreateContainer puts the container's cpuset (its exclusive CPUs, or the
// shared pool) into its CRI config, as upstream's internal container
// lifecycle does; with policy none it sets nothing.
func (m *Manager) PreCreateContainer(pod *v1.Pod, container *v1.Container, cfg *runtimeapi.ContainerConfig) {
	cpus, ok := m.CPUSet(string(pod.UID), container.Name)
	if !ok {
		return
	}
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	if cfg.Linux.Resources == nil {
		cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{}
	}
	cfg.Linux.Resources.CpusetCpus = cpus.String()
}

// PreStartContainer records that the created container has its CPUs
// (AddContainer).
func (m *Manager) PreStartContainer(pod *v1.Pod, container *v1.Container, _ string) {
	m.AddContainer(string(pod.UID), container.Name)
}
