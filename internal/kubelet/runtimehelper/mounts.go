package runtimehelper

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
)

const (
	etcHostsPath      = "/etc/hosts"
	etcHostsMountName = "k8s-managed-etc-hosts"
)

// ErrSubPathEscapes is returned (wrapped) when a volumeMount's subPath leads
// outside its volume (volumes.ErrSubPathEscapes).
var ErrSubPathEscapes = volumes.ErrSubPathEscapes

// makeMounts returns the container's mounts: one per volumeMount (with subPath
// resolved inside the volume), plus the managed /etc/hosts when the pod has an IP
// or uses the host network and no volumeMount targets /etc/hosts.
func (h *RuntimeHelper) makeMounts(pod *v1.Pod, c *v1.Container, hostname, domain string, podIPs []string, envs []kubecontainer.EnvVar) ([]kubecontainer.Mount, error) {
	mountHosts := len(podIPs) > 0 || pod.Spec.HostNetwork
	mounts := make([]kubecontainer.Mount, 0, len(c.VolumeMounts)+1)
	for i, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == etcHostsPath {
			mountHosts = false
		}
		m, err := h.volumeMount(pod, c, i, vm, envs)
		if err != nil {
			return nil, err
		}
		mounts = append(mounts, m)
	}
	if !mountHosts {
		return mounts, nil
	}
	path := h.etcHostsPath(pod.UID)
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create pod directory: %w", err)
	}
	if err := h.writeHosts(path, pod, podIPs, hostname, domain); err != nil {
		return nil, fmt.Errorf("write the pod's hosts file: %w", err)
	}
	return append(mounts, kubecontainer.Mount{
		Name:           etcHostsMountName,
		ContainerPath:  etcHostsPath,
		HostPath:       path,
		SELinuxRelabel: true,
	}), nil
}

// volumeMount converts the volumeMount at index idx of the container. A subPath
// is resolved inside the volume and pinned with a bind mount under the pod's
// volume-subpaths directory (volumes.BindSubPath); that mount, not the
// user-controlled path, is what the runtime gets.
func (h *RuntimeHelper) volumeMount(pod *v1.Pod, c *v1.Container, idx int, vm v1.VolumeMount, envs []kubecontainer.EnvVar) (kubecontainer.Mount, error) {
	info, ok := h.vols.get(pod.UID, vm.Name)
	if !ok {
		return kubecontainer.Mount{}, fmt.Errorf("cannot find volume %q to mount into container %q", vm.Name, c.Name)
	}
	prop, err := translatePropagation(vm.MountPropagation)
	if err != nil {
		return kubecontainer.Mount{}, err
	}
	if vm.RecursiveReadOnly != nil && *vm.RecursiveReadOnly == v1.RecursiveReadOnlyEnabled {
		return kubecontainer.Mount{}, fmt.Errorf("volume %q requested recursive read-only mode, which is not supported", vm.Name)
	}
	hostPath := info.HostPath
	sub, err := subPathOf(vm, envs)
	if err != nil {
		return kubecontainer.Mount{}, err
	}
	if sub != "" {
		hostPath, err = volumes.BindSubPath(volumes.SubPath{VolumePath: info.HostPath, Path: sub,
			PodDir: h.GetPodDir(pod.UID), VolumeName: vm.Name, ContainerName: c.Name, MountIndex: idx})
		if err != nil {
			return kubecontainer.Mount{}, fmt.Errorf("volumeMount %q of container %q: %w", vm.Name, c.Name, err)
		}
	}
	containerPath := vm.MountPath
	if !filepath.IsAbs(containerPath) {
		containerPath = "/" + containerPath
	}
	return kubecontainer.Mount{
		Name:           vm.Name,
		ContainerPath:  containerPath,
		HostPath:       hostPath,
		ReadOnly:       vm.ReadOnly || info.ReadOnly,
		SELinuxRelabel: info.Managed && h.vols.firstLabel(pod.UID, vm.Name),
		Propagation:    prop,
	}, nil
}

// subPathOf returns the mount's subPath (subPathExpr expanded with the
// container's environment), checked to be relative and without "..".
func subPathOf(vm v1.VolumeMount, envs []kubecontainer.EnvVar) (string, error) {
	sub := vm.SubPath
	if vm.SubPathExpr != "" {
		env := newOrderedEnv()
		for _, e := range envs {
			env.set(e.Name, e.Value)
		}
		sub = kubecontainer.Expand(vm.SubPathExpr, env.lookup)
	}
	if sub == "" {
		return "", nil
	}
	if filepath.IsAbs(sub) {
		return "", fmt.Errorf("subPath %q must not be an absolute path", sub)
	}
	for _, part := range strings.Split(sub, "/") {
		if part == ".." {
			return "", fmt.Errorf("subPath %q must not contain '..'", sub)
		}
	}
	return sub, nil
}

// translatePropagation maps the API mount propagation (nil = private).
func translatePropagation(mode *v1.MountPropagationMode) (runtimeapi.MountPropagation, error) {
	switch {
	case mode == nil, *mode == v1.MountPropagationNone:
		return runtimeapi.MountPropagation_PROPAGATION_PRIVATE, nil
	case *mode == v1.MountPropagationHostToContainer:
		return runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER, nil
	case *mode == v1.MountPropagationBidirectional:
		return runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL, nil
	}
	return 0, fmt.Errorf("invalid MountPropagation mode: %q", *mode)
}
