package container

import (
	"context"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeHelper is what the runtime manager (internal/kuberuntime) needs from
// the kubelet; internal/kubelet/runtimehelper implements it.
type RuntimeHelper interface {
	// GenerateRunContainerOptions returns env, mounts, devices and hostname for a
	// container (volumes are already set up). The returned func, when not nil,
	// is called once the container has been created.
	GenerateRunContainerOptions(ctx context.Context, pod *v1.Pod, container *v1.Container, podIP string, podIPs []string) (*RunContainerOptions, func(), error)
	GetPodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error)
	GetPodCgroupParent(pod *v1.Pod) string
	GetPodDir(podUID k8stypes.UID) string
	GeneratePodHostNameAndDomain(pod *v1.Pod) (hostname, hostDomain string, err error)
	GetExtraSupplementalGroupsForPod(pod *v1.Pod) []int64
}

// RunContainerOptions is what the kubelet resolved for one container.
type RunContainerOptions struct {
	// Envs are already resolved (value, fieldRef, resourceFieldRef); $(VAR)
	// expansion of command and args happens in the runtime manager.
	Envs    []EnvVar
	Mounts  []Mount
	Devices []DeviceInfo
	// CDIDevices are fully qualified CDI device names (vendor.com/class=name)
	// the device plugins asked for; the runtime applies their specs.
	CDIDevices []string
	// Annotations are added to the container's (device plugins'); the
	// kubelet's own keys win.
	Annotations map[string]string
	// Hostname is the container's hostname.
	Hostname string
	// PodContainerDir is <podDir>/containers/<name>; the termination message
	// file lives under it.
	PodContainerDir         string
	EnableHostUserNamespace bool
}

// EnvVar is one resolved environment variable.
type EnvVar struct {
	Name  string
	Value string
}

// Mount is one volume mount of a container.
type Mount struct {
	Name           string
	ContainerPath  string
	HostPath       string
	ReadOnly       bool
	SELinuxRelabel bool
	Propagation    runtimeapi.MountPropagation
}

// DeviceInfo is one host device given to a container.
type DeviceInfo struct {
	PathOnHost      string
	PathInContainer string
	Permissions     string
}
