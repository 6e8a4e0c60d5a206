package kubelet

import (
	"fmt"
	"net"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/zap"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podmanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
)

// Defaults applied to zero-valued Config fields.
const (
	DefaultResyncInterval       = 10 * time.Second
	DefaultHousekeepingInterval = 2 * time.Second
	DefaultGCInterval           = time.Minute
	DefaultMaxPods              = 110
	defaultBackOffPeriod        = 10 * time.Second
	crashLoopBackOffInitial     = 10 * time.Second
	crashLoopBackOffMax         = 300 * time.Second
)

// Options configures a Kubelet: the parts it drives (built before it, see
// internal/app) and its settings.
type Options struct {
	Parts  Parts
	Config Config
	// Recorder records pod events; nil records nothing.
	Recorder record.EventRecorder
	// Registerer receives the kubelet's and its pod workers' upstream series
	// (kubelet_pod_start_duration_seconds, kubelet_pod_worker_*); nil: not
	// registered.
	Registerer prometheus.Registerer
	// Tracer makes upstream's spans of the pod syncs (syncPod,
	// syncTerminatingPod, syncTerminatedPod; the kubelet's tracing
	// configuration); nil: none.
	Tracer trace.Tracer
	// Logger; nil: no logging.
	Logger *zap.Logger
}

// Parts are the pieces the kubelet drives, each behind a small interface of
// deps.go. All are required unless marked optional.
type Parts struct {
	// Pods is the pod manager, built first and shared with the managers
	// that count the node's pods; nil: a new one. The kubelet applies the
	// sources' updates to it and installs its test of a pod being active.
	Pods *podmanager.Manager
	// Runtime is the runtime manager. The kubelet does not run its loops.
	Runtime Runtime
	// Streaming is the runtime manager's logs, exec, attach, port-forward and
	// checkpoint side, which the kubelet API uses.
	Streaming StreamingRuntime
	// Helper is the runtime helper the runtime manager was built with.
	Helper RuntimeHelper
	// State is the runtime's health (runtimestate.State); its owner runs it.
	State RuntimeState
	// Sources delivers pods. The caller runs it.
	Sources PodSource
	// PLEG reports container changes; Kubelet.Run runs it.
	PLEG PLEG
	// Cache is the PLEG's pod status cache, which the pod workers read.
	// Required unless NewPodWorkers is set.
	Cache *kubecontainer.Cache
	// Prober runs probes; share its results with the runtime manager.
	Prober Prober
	// Volumes sets up pod volumes.
	Volumes VolumeManager
	// Status is the pod status store; share it with the prober (its
	// StatusProvider). Optional: nil builds a new one.
	Status *status.Manager
	// Cgroups are the pod cgroups (cm.Manager): each pod's is made before its
	// sandbox and removed once it terminated. Optional: nil manages none.
	Cgroups PodCgroups
	// Allocated is allocated_pods_state: the resources the kubelet gave each
	// pod, which in-place resizes change. Optional: nil turns in-place resize
	// off (the pods' resize status fields are not reported, so the API server
	// refuses resizes of this node's pods).
	Allocated *kubecontainer.ResourceState
	// CPUs is the CPU manager: containers get their CPUs at admission
	// (through Topology; a pod that cannot get them is rejected), released
	// when the pod terminated. Optional: nil assigns none.
	CPUs CPUManager
	// Memory is the memory manager: a Guaranteed pod's memory is pinned to
	// NUMA nodes at admission (by the topology manager, which allocates
	// through it), released when the pod terminated. Optional: nil pins
	// none.
	Memory MemoryManager
	// Devices gives containers the device plugins' devices at admission
	// (through Topology; a pod that cannot get them is rejected). Optional:
	// nil gives none.
	Devices DeviceAllocator
	// Topology is the topology manager: at admission it has the devices,
	// CPUs and memory allocated through their managers (its hint
	// providers), aligned on NUMA nodes as its policy wants
	// (topologymanager.Manager). Optional: nil allocates nothing.
	Topology ResourceAligner
	// Resources gives the node's allocatable that pods are admitted against
	// while no node object is known (resources.Node). Optional: nil admits
	// requests unchecked then.
	Resources NodeAllocatable
	// Features are the features the node declares
	// (nodefeatures.Declared): a pod that needs another is refused, asked
	// after the node pressure, as upstream's handler order, and an update that needs
	// another is warned of (event FailedNodeDeclaredFeaturesCheck).
	// Optional: nil checks nothing.
	Features NodeFeatures
	// Sysctls refuses pods that set sysctls neither safe nor allowed
	// (allowedUnsafeSysctls; sysctl.Allowlist), asked after Features, as
	// upstream's handler order. Optional: nil admits every sysctl.
	Sysctls PodAdmitter
	// NewPodWorkers builds the pod workers around the kubelet's sync
	// functions. Optional: nil is podworkers.New with Cache.
	NewPodWorkers func(sync podworkers.SyncFuncs) PodWorkers

	// With an API server (all nil for a standalone kubelet):

	// Node gives the node object pods are admitted against (name, selector,
	// affinity, allocatable).
	Node NodeGetter
	// Mirrors keeps an API mirror pod for each static pod.
	Mirrors MirrorClient
	// Secrets reads the pods' image pull secrets.
	Secrets SecretGetter
	// Objects keeps the configMaps and secrets of the pods being synced.
	Objects PodObjects
}

// Config are the kubelet's settings; zero values take the defaults.
type Config struct {
	// NodeIP is the node's IP: the pods' hostIP and the pod IP of host-network
	// pods. nil leaves them empty.
	NodeIP net.IP
	// ResyncInterval is how often every pod is synced; default 10s.
	ResyncInterval time.Duration
	// HousekeepingInterval is how often orphans are cleaned up; default 2s.
	HousekeepingInterval time.Duration
	// GCInterval is how often dead containers are collected; default 1m.
	GCInterval time.Duration
	// GCPolicy is the container GC policy (zero value: MinAge 0,
	// MaxPerPodContainer 1, MaxContainers -1).
	GCPolicy kubecontainer.GCPolicy
	// MaxPods is how many active pods the node admits; default 110.
	MaxPods int
	// CrashLoopBackOff is the container restart back-off; default 10s doubling
	// to 300s.
	CrashLoopBackOff *flowcontrol.Backoff
	// CPUManagerStatic says the CPU manager's policy is static: resizing the
	// cpu of a Guaranteed pod is then infeasible.
	CPUManagerStatic bool
	// MemoryManagerStatic says the memory manager's policy is Static:
	// resizing the memory of a Guaranteed pod is infeasible, as upstream.
	MemoryManagerStatic bool
	// NoPodLevelResize is InPlacePodLevelResourcesVerticalScaling off: a
	// resize of the pod-level resources is infeasible, and the pod status
	// reports no pod-level allocatedResources and resources.
	NoPodLevelResize bool
	// RestartRules says which stopped containers run again (the pod phase);
	// give the runtime manager, the status manager and the prober the same.
	// The zero value is upstream's default (ContainerRestartRules on).
	RestartRules kubecontainer.RestartRules
}

// withDefaults returns opts with defaults applied.
func (opts Options) withDefaults() Options {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Recorder == nil {
		opts.Recorder = kubecontainer.NopRecorder{}
	}
	if opts.Parts.Pods == nil {
		opts.Parts.Pods = podmanager.New()
	}
	c := &opts.Config
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = DefaultResyncInterval
	}
	if c.HousekeepingInterval <= 0 {
		c.HousekeepingInterval = DefaultHousekeepingInterval
	}
	if c.GCInterval <= 0 {
		c.GCInterval = DefaultGCInterval
	}
	if c.GCPolicy == (kubecontainer.GCPolicy{}) {
		c.GCPolicy = kubecontainer.GCPolicy{MaxPerPodContainer: 1, MaxContainers: -1}
	}
	if c.MaxPods <= 0 {
		c.MaxPods = DefaultMaxPods
	}
	if c.CrashLoopBackOff == nil {
		c.CrashLoopBackOff = flowcontrol.NewBackOff(crashLoopBackOffInitial, crashLoopBackOffMax)
	}
	if opts.Parts.Cgroups == nil {
		opts.Parts.Cgroups = noCgroups{}
	}
	if opts.Parts.CPUs == nil {
		opts.Parts.CPUs = noCPUs{}
	}
	if opts.Parts.Memory == nil {
		opts.Parts.Memory = noMemory{}
	}
	if opts.Parts.Status == nil {
		opts.Parts.Status = status.NewManager(status.Options{Logger: opts.Logger.Named("status")})
	}
	return opts
}

// validate checks the required parts.
func (p Parts) validate() error {
	for _, dep := range []struct {
		name    string
		missing bool
	}{
		{"Runtime", p.Runtime == nil},
		{"Streaming", p.Streaming == nil},
		{"Helper", p.Helper == nil},
		{"State", p.State == nil},
		{"Sources", p.Sources == nil},
		{"PLEG", p.PLEG == nil},
		{"Prober", p.Prober == nil},
		{"Volumes", p.Volumes == nil},
		{"Cache", p.Cache == nil && p.NewPodWorkers == nil},
	} {
		if dep.missing {
			return fmt.Errorf("kubelet: Options.Parts.%s is required", dep.name)
		}
	}
	return nil
}
