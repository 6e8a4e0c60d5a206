package kubelet

import (
	"context"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/prober"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
)

// The consumer-side interfaces of the pieces the kubelet drives. The concrete
// types (*kuberuntime.Manager, *pleg.GenericPLEG, *prober.Manager,
// *volumes.Manager, *runtimehelper.RuntimeHelper, *runtimestate.State,
// *resources.Node, *podsource.Source, *podworkers.PodWorkers) satisfy them;
// the tests use fakes.

// Runtime is the runtime manager. The kubelet does not call its Start: the
// caller runs the manager's own loops (log rotation).
type Runtime interface {
	SyncPod(ctx context.Context, pod *v1.Pod, status *kubecontainer.PodStatus, pullSecrets []v1.Secret, backOff *flowcontrol.Backoff, restartAllContainers bool) kubecontainer.PodSyncResult
	KillPod(ctx context.Context, pod *v1.Pod, runningPod *kubecontainer.Pod, gracePeriodOverride *int64) error
	GetPodStatus(ctx context.Context, uid k8stypes.UID, name, namespace string) (*kubecontainer.PodStatus, error)
	GetPods(ctx context.Context, all bool) ([]*kubecontainer.Pod, error)
	GarbageCollect(ctx context.Context, policy kubecontainer.GCPolicy, allSourcesReady bool, evictNonDeletedPods bool, podStateProvider kubecontainer.PodStateProvider) error
	Status(ctx context.Context) (*runtimeapi.StatusResponse, error)
	UpdateContainerResources(ctx context.Context, containerID string, r *runtimeapi.ContainerResources) error
	// IsPodResizeInProgress reports whether a running container of the
	// (allocated) pod has not been given its allocation yet.
	IsPodResizeInProgress(pod *v1.Pod, ps *kubecontainer.PodStatus) bool
	// ForgetPod drops what the runtime manager recorded of a terminated pod.
	ForgetPod(pod *v1.Pod)
}

// PodSource delivers the pods of the configured sources. The caller runs it
// (podsource.Source.Run); the kubelet only reads.
type PodSource interface {
	Updates() <-chan kubecontainer.PodUpdate
	SeenAllSources() bool
}

// PLEG reports container state changes; Kubelet.Run runs it.
type PLEG interface {
	Run(ctx context.Context)
	Watch() <-chan *pleg.PodLifecycleEvent
	Healthy() (bool, error)
	RequestPodReinspect(uid k8stypes.UID)
	// PodChanged: the kubelet changed the pod in the runtime; a worker's
	// next status must be read after that.
	PodChanged(uid k8stypes.UID, name, namespace string)
}

// Prober runs the containers' probes.
type Prober interface {
	AddPod(ctx context.Context, pod *v1.Pod)
	RemovePod(pod *v1.Pod)
	CleanupPods(desired map[k8stypes.UID]struct{})
	UpdatePodStatus(uid k8stypes.UID, status *v1.PodStatus)
	LivenessUpdates() <-chan prober.Update
	ReadinessUpdates() <-chan prober.Update
	StartupUpdates() <-chan prober.Update
}

// PodCgroups are the pod cgroups of the container manager (*cm.Manager).
type PodCgroups interface {
	PodCgroupExists(pod *v1.Pod) bool
	EnsurePod(pod *v1.Pod, active []*v1.Pod) error
	DestroyPod(uid k8stypes.UID) error
	UpdateQoS(active []*v1.Pod) error
	CleanupOrphans(active map[k8stypes.UID]bool) error
	// PodCgroupResources reads what the pod's cgroup applies (the pod
	// status's pod-level resources).
	PodCgroupResources(pod *v1.Pod) (kubecontainer.PodCgroupResources, error)
}

// CPUManager assigns CPUs to pods (cpumanager.Manager): at admission
// (through the topology manager), released once the pod terminated.
type CPUManager interface {
	// ExclusiveCPUs is the container's exclusive CPUs; ok is false when it
	// has none.
	ExclusiveCPUs(podUID, containerName string) (set cpuset.CPUSet, ok bool)
	RemovePod(podUID string) error
}

// MemoryManager pins the memory of Guaranteed pods to NUMA nodes
// (memorymanager.Manager): allocated at admission through the topology
// manager, released once the pod terminated.
type MemoryManager interface {
	HoldsPod(podUID string) bool
	RemovePod(podUID string) error
}

// DeviceAllocator gives containers the devices of device plugins
// (devicemanager.Manager) at admission (through the topology manager), and
// takes them back from a pod admission then rejects.
type DeviceAllocator interface {
	// PodDevices lists the devices of each container of the pod.
	PodDevices(uid k8stypes.UID) map[string]map[string][]string
	RemovePod(podUID string) error
}

// ResourceAligner allocates a pod's resources (devices, CPUs, memory) at admission
// aligned on NUMA nodes (topologymanager.Manager); a refusal carries its
// reason (TopologyAffinityError, UnexpectedAdmissionError, ...).
type ResourceAligner interface {
	Admit(pod *v1.Pod) (reason, message string, ok bool)
}

// noCPUs assigns nothing (CPU manager policy none).
type noCPUs struct{}

func (noCPUs) ExclusiveCPUs(string, string) (cpuset.CPUSet, bool) {
	return cpuset.CPUSet{}, false
}
func (noCPUs) RemovePod(string) error { return nil }

// noMemory pins nothing (memory manager policy None).
type noMemory struct{}

func (noMemory) HoldsPod(string) bool   { return false }
func (noMemory) RemovePod(string) error { return nil }

// noCgroups manages no pod cgroup.
type noCgroups struct{}

func (noCgroups) PodCgroupExists(*v1.Pod) bool               { return true }
func (noCgroups) EnsurePod(*v1.Pod, []*v1.Pod) error         { return nil }
func (noCgroups) DestroyPod(k8stypes.UID) error              { return nil }
func (noCgroups) UpdateQoS([]*v1.Pod) error                  { return nil }
func (noCgroups) CleanupOrphans(map[k8stypes.UID]bool) error { return nil }
func (noCgroups) PodCgroupResources(*v1.Pod) (kubecontainer.PodCgroupResources, error) {
	return kubecontainer.PodCgroupResources{}, nil
}

// VolumeManager sets up and tears down pod volumes.
type VolumeManager interface {
	MountVolumes(ctx context.Context, pod *v1.Pod) (map[string]volumes.VolumeInfo, error)
	UnmountVolumes(ctx context.Context, podUID k8stypes.UID) error
	CleanupOrphans(ctx context.Context, active map[k8stypes.UID]bool) error
}

// RuntimeHelper is the runtime helper's side the kubelet drives
// (*runtimehelper.RuntimeHelper): the pod directories and the volumes the
// containers mount.
type RuntimeHelper interface {
	GetPodDir(uid k8stypes.UID) string
	CheckpointsDir() string
	SetVolumes(uid k8stypes.UID, infos map[string]volumes.VolumeInfo)
	ForgetVolumes(uid k8stypes.UID)
}

// RuntimeState is the runtime's health as last checked
// (*runtimestate.State).
type RuntimeState interface {
	RuntimeError() error
	NetworkError() error
}

// NodeAllocatable gives the node's current allocatable (*resources.Node).
type NodeAllocatable interface {
	Allocatable() v1.ResourceList
}

// PodWorkers drives each pod through sync, terminating and terminated.
type PodWorkers interface {
	UpdatePod(opts podworkers.UpdatePodOptions)
	SyncKnownPods(desired []*v1.Pod) map[k8stypes.UID]podworkers.PodWorkerSync
	IsPodTerminationRequested(uid k8stypes.UID) bool
	CouldHaveRunningContainers(uid k8stypes.UID) bool
	ShouldPodContentBeRemoved(uid k8stypes.UID) bool
	ShouldPodRuntimeBeRemoved(uid k8stypes.UID) bool
	IsPodKnownTerminated(uid k8stypes.UID) bool
	Stop()
}

// NodeGetter gives the node object pods are admitted against (labels,
// allocatable); ok is false until the node is known. FreshNode reads it from
// the API server at once (admission does when only the node affinity refuses
// a pod: the labels it needs may be newer than the known node).
type NodeGetter interface {
	Node() (*v1.Node, bool)
	FreshNode(ctx context.Context) (*v1.Node, error)
}

// MirrorClient creates and deletes the API mirror pods of static pods.
type MirrorClient interface {
	CreateMirrorPod(ctx context.Context, static *v1.Pod) error
	DeleteMirrorPod(ctx context.Context, namespace, name string, uid *k8stypes.UID) (bool, error)
}

// SecretGetter reads secrets (image pull secrets) from the API server.
type SecretGetter interface {
	GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// PodObjects keeps the configMaps and secrets the pods reference: a pod is
// registered at each sync and unregistered once its volumes are torn down,
// as upstream's kubelet does with its secret and configMap managers
// (apiobjects.Objects).
type PodObjects interface {
	RegisterPod(pod *v1.Pod)
	UnregisterPod(pod *v1.Pod)
}

// PressureAdmitter decides whether the node under resource pressure takes a
// pod (eviction.Manager).
type PressureAdmitter = PodAdmitter

// PodAdmitter is one admission check: a refusal gives the pod's reason and
// message.
type PodAdmitter interface {
	Admit(pod *v1.Pod) (reason, message string, ok bool)
}

// NodeFeatures checks pods against the features the node declares
// (nodefeatures.Declared).
type NodeFeatures interface {
	PodAdmitter
	// MissingForUpdate lists the undeclared features the change from old
	// to cur needs.
	MissingForUpdate(old, cur *v1.Pod) ([]string, error)
}
