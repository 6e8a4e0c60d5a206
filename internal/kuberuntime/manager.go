package kuberuntime

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// Defaults applied by New to zero-valued Options fields.
const (
	DefaultPodLogsDir = "/var/log/pods"
	// DefaultSeccompProfileRoot is <root-dir>/seccomp for the default --root-dir.
	DefaultSeccompProfileRoot   = "/var/lib/kubelet/seccomp"
	DefaultContainerLogMaxSize  = 10 * 1024 * 1024
	DefaultContainerLogMaxFiles = 5
	DefaultCPUCFSQuotaPeriod    = 100 * time.Millisecond
	defaultImageBackOffInitial  = 10 * time.Second
	defaultImageBackOffMax      = 300 * time.Second
)

// ProbeResults tells computePodActions which containers failed their probes, so
// they get killed (and restarted per restart policy). The prober implements it.
type ProbeResults interface {
	LivenessFailed(id kubecontainer.ContainerID) bool
	StartupFailed(id kubecontainer.ContainerID) bool
}

// StartupSucceeded may also be implemented by a ProbeResults value. When it is,
// a sidecar (an init container with restartPolicy Always) that has a startup
// probe holds back the next init container until its startup probe succeeded,
// as upstream does. Without it the next init container starts as soon as the
// sidecar runs.
type StartupSucceeded interface {
	StartupSucceeded(id kubecontainer.ContainerID) bool
}

// RuntimeClasses resolves a runtimeClassName to its CRI runtime handler
// (runtimeclass.Manager): "" for none.
type RuntimeClasses interface {
	LookupRuntimeHandler(ctx context.Context, name *string) (string, error)
}

// Options configures a Manager.
type Options struct {
	// Tracer makes upstream's Containers/GarbageCollect span (the kubelet's
	// tracing, scope TracerName); nil: none.
	Tracer trace.Tracer
	// Runtime and Images reach the CRI runtime. Required.
	Runtime internalapi.RuntimeService
	Images  internalapi.ImageManagerService
	// Helper is the kubelet side; required by SyncPod (container configs).
	Helper kubecontainer.RuntimeHelper
	// RuntimeClasses gives the runtime handler of a pod's runtimeClassName;
	// nil (standalone): every sandbox gets the default handler, as
	// upstream's kubelet without an API server.
	RuntimeClasses RuntimeClasses
	Logger         *zap.Logger
	// Recorder receives events; nil records nothing.
	Recorder record.EventRecorder
	// ProbeResults reports liveness/startup probe failures; nil means none.
	ProbeResults ProbeResults
	// PodLogsDir is where container logs live; default /var/log/pods.
	PodLogsDir string
	// SeccompProfileRoot is where Localhost seccomp profiles live
	// (<root-dir>/seccomp); default /var/lib/kubelet/seccomp.
	SeccompProfileRoot string
	// DefaultPodSysctls are given to every sandbox whose pod has their
	// namespace, before the pod's own (defaultPodSysctls, with the
	// DefaultPodSysctls gate); nil: none.
	DefaultPodSysctls map[string]string
	// PodInfraImage is only used for image GC pinning; the sandbox image is the
	// runtime's choice.
	PodInfraImage string
	// SerializeImagePulls pulls one image at a time (the kubelet's default is
	// true; the caller passes its flag value).
	SerializeImagePulls bool
	// MaxParallelImagePulls bounds the pulls in flight when
	// SerializeImagePulls is false (0: no bound), as maxParallelImagePulls.
	MaxParallelImagePulls int
	// PullQPS and PullBurst throttle image pulls (registryPullQPS,
	// registryBurst): a pull over the rate fails with "pull QPS exceeded"
	// and is retried with the pull back-off, as upstream. 0 QPS: no limit.
	PullQPS   float32
	PullBurst int
	// ImagePullBackOff is the image pull back-off; default 10s doubling to 300s.
	ImagePullBackOff *flowcontrol.Backoff
	// ContainerLogMaxSize in bytes, default 10Mi; ContainerLogMaxFiles default 5.
	ContainerLogMaxSize  int64
	ContainerLogMaxFiles int
	// NodeKeyring answers the node's own registry credentials for an image
	// repository (the Docker config files, credential provider plugins),
	// tried after the pod's pull secrets, as upstream's union keyring.
	// Optional.
	NodeKeyring NodeKeyring
	// PullRecords, with KubeletEnsureSecretPulledImages, records the
	// credentials each image was pulled with and decides whether a pod may
	// use an image already present (nil: any pod may).
	PullRecords PullRecorder
	// SeccompDefault gives containers that set no seccomp profile the
	// runtime's default instead of Unconfined (seccompDefault).
	SeccompDefault bool
	// ContainerLogMaxWorkers is how many containers' logs are rotated at
	// once (default 1); ContainerLogMonitorInterval how often the logs are
	// checked (default 10s).
	ContainerLogMaxWorkers      int
	ContainerLogMonitorInterval time.Duration
	// CPUCFSQuota enforces CPU limits (the caller passes its flag value, the
	// kubelet's default is true); CPUCFSQuotaPeriod defaults to 100ms.
	CPUCFSQuota       bool
	CPUCFSQuotaPeriod time.Duration
	// MemoryQoS sets the containers' cgroup v2 memory protection and
	// throttling; the zero value (cgroup v1) sets none.
	MemoryQoS MemoryQoS
	// OOMGroupKill has every container's processes OOM-killed together
	// (memory.oom.group 1 in its Unified resources): upstream's default on
	// cgroup v2, off with singleProcessOOMKill; never on cgroup v1.
	OOMGroupKill bool
	// Swap is the containers' swap (memorySwap); the zero value sets none.
	Swap Swap
	// MachineMemoryBytes is the machine's memory (MemTotal) for the
	// oom_score_adj of Burstable containers (resources.Machine). Required.
	MachineMemoryBytes int64
	// RuntimeName is the runtime's name from Version, e.g. "docker"; it is the
	// Type of every ContainerID. Required.
	RuntimeName string
	// Lifecycle is the container manager's part in creating containers (the
	// CPU manager's cpuset); nil does nothing.
	Lifecycle ContainerLifecycle
	// StateDir holds the actuated resources of the containers
	// (actuated_pods_state; upstream: the root directory); "" disables
	// in-place resize.
	StateDir string
	// PodCgroups resizes pod cgroups in place; nil leaves them alone.
	PodCgroups PodCgroupResizer
	// MaxParallelStarts bounds the runtime start steps (a sandbox's creation,
	// a container's create and start) running at once, a free slot going to
	// the pod seen first; 0: no bound.
	MaxParallelStarts int
	// Registerer receives upstream's kubelet_started_* and
	// kubelet_image_pull_duration_seconds series; nil: not registered.
	Registerer prometheus.Registerer
	// Startup learns the image pulls and init container runs that the pod
	// start SLI leaves out; nil: nobody.
	Startup StartupRecorder
	// RestartRules decides which stopped containers run again (the
	// ContainerRestartRules gate); the zero value is upstream's default.
	RestartRules kubecontainer.RestartRules
}

// StartupRecorder is the pod start SLI's view of the runtime manager: the
// time each pod spends pulling images and running init containers.
type StartupRecorder interface {
	RecordImageStartedPulling(uid k8stypes.UID)
	RecordImageFinishedPulling(uid k8stypes.UID)
	RecordInitContainerStarted(uid k8stypes.UID, at time.Time)
	RecordInitContainerFinished(uid k8stypes.UID, at time.Time)
}

// noStartup records nothing.
type noStartup struct{}

func (noStartup) RecordImageStartedPulling(k8stypes.UID)              {}
func (noStartup) RecordImageFinishedPulling(k8stypes.UID)             {}
func (noStartup) RecordInitContainerStarted(k8stypes.UID, time.Time)  {}
func (noStartup) RecordInitContainerFinished(k8stypes.UID, time.Time) {}

// ContainerLifecycle is upstream's internal container lifecycle: the
// container manager adjusts a container's config before it is created and
// learns its ID once it is.
type ContainerLifecycle interface {
	PreCreateContainer(pod *v1.Pod, container *v1.Container, cfg *runtimeapi.ContainerConfig)
	PreStartContainer(pod *v1.Pod, container *v1.Container, containerID string)
}

// noLifecycle adjusts nothing.
type noLifecycle struct{}

func (noLifecycle) PreCreateContainer(*v1.Pod, *v1.Container, *runtimeapi.ContainerConfig) {}
func (noLifecycle) PreStartContainer(*v1.Pod, *v1.Container, string)                       {}

// TracerName is the instrumentation scope of the runtime manager's spans,
// upstream's.
const TracerName = "k8s.io/kubernetes/pkg/kubelet/kuberuntime"

// Manager is the runtime manager. It is safe for concurrent use by the pod
// workers (one SyncPod per pod at a time).
type Manager struct {
	tracer             trace.Tracer
	defaultSysctls     map[string]string
	starts             *startGate // nil: no bound
	metrics            *syncMetrics
	runtime            internalapi.RuntimeService
	images             internalapi.ImageManagerService
	helper             kubecontainer.RuntimeHelper
	runtimeClasses     RuntimeClasses // nil: the default handler
	logger             *zap.Logger
	loops              lifecycle.Loops // what Start began
	recorder           record.EventRecorder
	startup            StartupRecorder
	podLogsDir         string
	seccompRoot        string // Localhost seccomp profiles are relative to it
	seccompDefault     bool
	nodeKeyring        NodeKeyring
	pullRecords        PullRecorder
	imagePullBackOff   *flowcontrol.Backoff
	pullSlots          chan struct{}           // nil: pulls are not bounded
	pullLimiter        flowcontrol.RateLimiter // nil: pulls are not throttled
	logMaxSize         int64
	logMaxFiles        int
	logMaxWorkers      int
	logMonitorInterval time.Duration
	cpuCFSQuota        bool
	cpuCFSQuotaPeriod  time.Duration
	machineMemory      int64
	memoryQoS          MemoryQoS
	oomGroupKill       bool
	swap               Swap
	runtimeName        string
	lifecycle          ContainerLifecycle
	actuated           *kubecontainer.ResourceState // nil: no in-place resize
	podCgroups         PodCgroupResizer

	podInfraImage string
	probeResults  ProbeResults
	restart       kubecontainer.RestartRules
	// hookClient runs httpGet lifecycle hooks.
	hookClient *http.Client
}

// New wires a Manager; it does no I/O.
func New(opts Options) (*Manager, error) {
	if opts.Runtime == nil {
		return nil, errors.New("kuberuntime: Options.Runtime is required")
	}
	if opts.Images == nil {
		return nil, errors.New("kuberuntime: Options.Images is required")
	}
	if opts.RuntimeName == "" {
		return nil, errors.New("kuberuntime: Options.RuntimeName is required (the runtime's name from Version)")
	}
	if opts.MachineMemoryBytes <= 0 {
		return nil, errors.New("kuberuntime: Options.MachineMemoryBytes is required (the machine's MemTotal)")
	}
	met, err := newSyncMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	m := &Manager{
		tracer:             opts.Tracer,
		defaultSysctls:     opts.DefaultPodSysctls,
		starts:             newStartGate(opts.MaxParallelStarts),
		metrics:            met,
		runtime:            opts.Runtime,
		images:             opts.Images,
		helper:             opts.Helper,
		logger:             opts.Logger,
		recorder:           opts.Recorder,
		runtimeClasses:     opts.RuntimeClasses,
		startup:            opts.Startup,
		podLogsDir:         opts.PodLogsDir,
		seccompRoot:        opts.SeccompProfileRoot,
		seccompDefault:     opts.SeccompDefault,
		nodeKeyring:        opts.NodeKeyring,
		pullRecords:        opts.PullRecords,
		imagePullBackOff:   opts.ImagePullBackOff,
		pullSlots:          pullSlots(opts.SerializeImagePulls, opts.MaxParallelImagePulls),
		logMaxSize:         opts.ContainerLogMaxSize,
		logMaxFiles:        opts.ContainerLogMaxFiles,
		logMaxWorkers:      opts.ContainerLogMaxWorkers,
		logMonitorInterval: opts.ContainerLogMonitorInterval,
		cpuCFSQuota:        opts.CPUCFSQuota,
		cpuCFSQuotaPeriod:  opts.CPUCFSQuotaPeriod,
		machineMemory:      opts.MachineMemoryBytes,
		memoryQoS:          opts.MemoryQoS,
		oomGroupKill:       opts.OOMGroupKill,
		swap:               opts.Swap,
		runtimeName:        opts.RuntimeName,
		podInfraImage:      opts.PodInfraImage,
		restart:            opts.RestartRules,
		probeResults:       opts.ProbeResults,
		hookClient:         newHookHTTPClient(),
	}
	if opts.PullQPS > 0 {
		m.pullLimiter = flowcontrol.NewTokenBucketRateLimiter(opts.PullQPS, max(opts.PullBurst, 1))
	}
	if m.logger == nil {
		m.logger = zap.NewNop()
	}
	if m.recorder == nil {
		m.recorder = kubecontainer.NopRecorder{}
	}
	if m.startup == nil {
		m.startup = noStartup{}
	}
	if m.podLogsDir == "" {
		m.podLogsDir = DefaultPodLogsDir
	}
	if m.seccompRoot == "" {
		m.seccompRoot = DefaultSeccompProfileRoot
	}
	if m.imagePullBackOff == nil {
		m.imagePullBackOff = flowcontrol.NewBackOff(defaultImageBackOffInitial, defaultImageBackOffMax)
	}
	if m.logMaxSize <= 0 {
		m.logMaxSize = DefaultContainerLogMaxSize
	}
	if m.logMaxFiles <= 0 {
		m.logMaxFiles = DefaultContainerLogMaxFiles
	}
	if m.cpuCFSQuotaPeriod <= 0 {
		m.cpuCFSQuotaPeriod = DefaultCPUCFSQuotaPeriod
	}
	if m.lifecycle = opts.Lifecycle; m.lifecycle == nil {
		m.lifecycle = noLifecycle{}
	}
	if opts.StateDir != "" {
		st, err := kubecontainer.OpenResourceState(opts.StateDir, kubecontainer.ActuatedPodsStateFile)
		if err != nil {
			return nil, err
		}
		m.actuated = st
	}
	if opts.PodCgroups != nil {
		m.podCgroups = opts.PodCgroups
	}
	if m.tracer == nil {
		m.tracer = noop.NewTracerProvider().Tracer(TracerName)
	}
	return m, nil
}

// Start begins the container log rotation loop, which runs until ctx ends
// (Wait waits for it). Garbage collection is driven by the kubelet through
// GarbageCollect.
func (m *Manager) Start(ctx context.Context) error {
	m.loops.Go(m.logger, "container log rotation", func() { m.rotateLogsLoop(ctx) })
	return nil
}

// Wait returns once the loop Start began has ended.
func (m *Manager) Wait() { m.loops.Wait() }

// Status returns the runtime's status (conditions RuntimeReady/NetworkReady,
// its handlers and features), for the kubelet's readiness and the node status.
func (m *Manager) Status(ctx context.Context) (*runtimeapi.StatusResponse, error) {
	resp, err := m.runtime.Status(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("runtime status: %w", err)
	}
	if resp.GetStatus() == nil {
		return nil, errors.New("runtime status: the runtime returned no status")
	}
	return resp, nil
}

// UpdateContainerResources applies resources to a running container
// through the runtime (the CPU manager's cpuset, a resize).
func (m *Manager) UpdateContainerResources(ctx context.Context, containerID string, r *runtimeapi.ContainerResources) error {
	if err := m.runtime.UpdateContainerResources(ctx, containerID, r); err != nil {
		return fmt.Errorf("update resources of container %s: %w", containerID, err)
	}
	return nil
}

// RuntimeName is the runtime's name, the Type of the container IDs this manager
// reports.
func (m *Manager) RuntimeName() string { return m.runtimeName }

// containerID qualifies a CRI container ID with the runtime name.
func (m *Manager) containerID(id string) kubecontainer.ContainerID {
	return kubecontainer.ContainerID{Type: m.runtimeName, ID: id}
}

// newHookHTTPClient builds the client for httpGet lifecycle hooks: no proxy, no
// keep-alives, TLS without verification (as upstream), redirects followed only
// to the same host.
func newHookHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:             nil,
			DisableKeepAlives: true,
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // upstream hooks skip verification
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			if req.URL.Hostname() != via[0].URL.Hostname() {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
}
