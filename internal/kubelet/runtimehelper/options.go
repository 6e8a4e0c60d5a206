package runtimehelper

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Defaults applied to zero-valued Options fields.
const (
	DefaultRootDir       = "/var/lib/kubelet"
	DefaultClusterDomain = "cluster.local"
)

// Options configures a RuntimeHelper. DNS is required.
type Options struct {
	// RootDir is the kubelet's directory; pods live in RootDir/pods/<uid>.
	// Absolute; default /var/lib/kubelet.
	RootDir string
	// ClusterDomain makes a pod's FQDN <subdomain>.<ns>.svc.<domain>; default
	// cluster.local.
	ClusterDomain string
	// NodeIP is the node's IP: status.hostIP in the downward API. nil leaves it
	// empty.
	NodeIP net.IP
	// DNS computes the pods' resolv.conf (required).
	DNS DNSConfigurer
	// Node gives the node's allocatable, the default limit of containers that
	// set none in the downward API (resources.Node); nil: none (0).
	Node NodeAllocatable
	// EnvObjects reads the configMaps and secrets of env and envFrom; nil: a
	// standalone kubelet (required references fail, optional ones are skipped).
	EnvObjects EnvObjects
	// Services lists the services of the pods' service environment variables;
	// nil: none.
	Services ServiceLister
	// Cgroups names each pod's cgroup, the sandbox's cgroup parent (cm.Manager);
	// nil: none, so pods run in the runtime's default parent.
	Cgroups PodCgroupParenter
	// Devices gives what the device plugins' allocations ask of a container
	// (devicemanager.Manager); nil: none.
	Devices DeviceOptions
	// Recorder records the InvalidEnvironmentVariableNames warnings; nil:
	// they are only logged.
	Recorder record.EventRecorder
	// Logger; nil: no logging.
	Logger *zap.Logger
}

// DeviceOptions gives the device nodes, mounts, environment and
// annotations the device plugins' allocations ask of a container.
type DeviceOptions interface {
	ContainerOptions(pod *v1.Pod, c *v1.Container) (*pluginapi.ContainerAllocateResponse, error)
}

// PodCgroupParenter names a pod's cgroup as the CRI's cgroup_parent.
type PodCgroupParenter interface {
	PodCgroupParent(pod *v1.Pod) string
}

// DNSConfigurer computes a pod's resolv.conf.
type DNSConfigurer interface {
	GetPodDNS(pod *v1.Pod) (*runtimeapi.DNSConfig, error)
}

// NodeAllocatable gives the node's current allocatable (resources.Node).
type NodeAllocatable interface {
	Allocatable() v1.ResourceList
}

// EnvObjects reads the configMaps and secrets a container's environment
// refers to (apiobjects.Objects); missing objects are apierrors NotFound.
type EnvObjects interface {
	GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error)
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// ServiceLister lists the services of the service environment variables
// (apiobjects.Objects); the returned services must not be modified.
type ServiceLister interface {
	ListServices(namespace string) ([]*v1.Service, error)
	// HasSynced reports whether the services were listed at least once.
	HasSynced() bool
}

// withDefaults returns opts with defaults applied, or an error naming what is
// missing or wrong.
func (opts Options) withDefaults() (Options, error) {
	if opts.RootDir == "" {
		opts.RootDir = DefaultRootDir
	}
	if !filepath.IsAbs(opts.RootDir) {
		return opts, fmt.Errorf("runtimehelper: RootDir %q must be absolute", opts.RootDir)
	}
	if opts.DNS == nil {
		return opts, errors.New("runtimehelper: Options.DNS is required")
	}
	if opts.ClusterDomain == "" {
		opts.ClusterDomain = DefaultClusterDomain
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return opts, nil
}
