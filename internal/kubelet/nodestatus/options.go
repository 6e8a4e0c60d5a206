package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// Defaults, as in the upstream KubeletConfiguration.
const (
	DefaultStatusUpdateFrequency = 10 * time.Second
	DefaultStatusReportFrequency = 5 * time.Minute
	DefaultLeaseDuration         = 40 * time.Second
	DefaultKubeletPort           = 10250
)

// RuntimeHandlers reports the container runtime's handlers and features as
// the Node's status fields (runtimestate.State); empty and nil before the
// runtime was first ready.
type RuntimeHandlers interface {
	RuntimeHandlers() []v1.NodeRuntimeHandler
	RuntimeFeatures() *v1.NodeFeatures
}

// RuntimeInfo reports the container runtime's name and version, e.g.
// ("docker", "20.10.24"): nodeInfo.containerRuntimeVersion is name://version.
type RuntimeInfo interface {
	Version(ctx context.Context) (runtimeName, runtimeVersion string, err error)
}

// NodeResources is the node's machine (read once), capacity and allocatable
// (resources.Node).
type NodeResources interface {
	Machine() resources.Machine
	Capacity() v1.ResourceList
	AllocatableOf(capacity v1.ResourceList) v1.ResourceList
}

// PressureReporter reports the pressure conditions (eviction.Manager).
type PressureReporter interface {
	IsUnderMemoryPressure() bool
	IsUnderDiskPressure() bool
	IsUnderPIDPressure() bool
}

// ImageLister gives node.status.images (images.Manager): at most max
// images, largest first (-1 = all).
type ImageLister interface {
	NodeImages(max int) []v1.ContainerImage
}

// Options configures a Controller. Client, NodeName and Resources are required.
type Options struct {
	// Client talks to the API server with the node's credentials.
	Client kubernetes.Interface
	// NodeName is the Node object's name.
	NodeName string
	// Known receives the node as the controller reads and writes it, and
	// carries the requests for an update at once (Known.RequestSync).
	// Optional: nil is a Known of its own.
	Known *Known
	// Hostname is the kubernetes.io/hostname label and the Hostname address; "" = NodeName.
	Hostname string
	// NodeIPs are the InternalIP addresses (--node-ip, at most two: one per family).
	// Empty or an unspecified address = detect: the hostname if it is an IP, else a
	// lookup of NodeName, else the IP of the default-route interface.
	NodeIPs []net.IP
	// Labels (--node-labels) are merged over the default labels
	// (kubernetes.io/hostname, kubernetes.io/os, kubernetes.io/arch, beta.kubernetes.io/os,
	// beta.kubernetes.io/arch).
	Labels map[string]string
	// Taints (--register-with-taints) are set when the node is created; an existing
	// node's taints are left alone.
	Taints []v1.Taint
	// Resources is the node's machine, capacity and allocatable (required;
	// resources.Node).
	Resources NodeResources
	// Pressure reports the MemoryPressure, DiskPressure and PIDPressure
	// conditions; nil = never under pressure.
	Pressure PressureReporter
	// Images lists node.status.images; nil = none reported.
	Images ImageLister
	// MaxImages is nodeStatusMaxImages: how many images are reported (-1 =
	// all).
	MaxImages int
	// Runtime gives containerRuntimeVersion; nil leaves it empty.
	Runtime RuntimeInfo
	// RuntimeHandlers gives status.runtimeHandlers and status.features (the
	// runtime's, as upstream's RuntimeHandlers and NodeFeatures setters; the
	// gates they depend on are locked on in 1.37); nil leaves them as they
	// are.
	RuntimeHandlers RuntimeHandlers
	// Readiness reports whether the runtime and network are ready: nil error = Ready,
	// else Ready=False with reason KubeletNotReady and the error as message.
	// nil func = always ready.
	Readiness func() error
	// KubeletVersion is nodeInfo.kubeletVersion, e.g. "v1.37.1".
	KubeletVersion string
	// RunningInUserNamespace is nodeInfo.runningInUserNamespace (upstream
	// sets it with the KubeletInUserNamespace gate); nil leaves it unset.
	RunningInUserNamespace *bool
	// DeclaredFeatures is status.declaredFeatures, sorted
	// (nodefeatures.Declared); nil leaves it as it is.
	DeclaredFeatures []string
	// KubeletPort is status.daemonEndpoints.kubeletEndpoint.Port; 0 = 10250.
	KubeletPort int
	// StatusUpdateFrequency is how often the status is computed (patched when it
	// changed); 0 = 10s.
	StatusUpdateFrequency time.Duration
	// StatusReportFrequency is how often the status is patched even when unchanged; 0 = 5m.
	StatusReportFrequency time.Duration
	// LeaseDuration is the Lease's leaseDurationSeconds (whole seconds, at least 1s);
	// it is renewed every LeaseDuration/4. 0 = 40s.
	LeaseDuration time.Duration
	// OnRepeatedHeartbeatFailure is called when a status update or Lease renewal
	// fails again within one attempt (upstream closes the client's connections
	// there); optional.
	OnRepeatedHeartbeatFailure func()
	// Recorder receives node events (Starting, NodeReady, NodeNotReady,
	// NodeHasSufficientMemory, ...); optional.
	Recorder record.EventRecorder
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// ProviderID is spec.providerID of the node the kubelet creates
	// (providerID, --provider-id).
	ProviderID string
	// NoControllerAttachDetach (enableControllerAttachDetach false) leaves
	// out the volumes.kubernetes.io/controller-managed-attach-detach
	// annotation (and removes it from an existing node).
	NoControllerAttachDetach bool
	// ExternalCloudProvider (--cloud-provider=external): the node is created
	// with the node.cloudprovider.kubernetes.io/uninitialized taint, a given
	// node IP is published in the alpha.kubernetes.io/provided-node-ip
	// annotation, and addresses the cloud controller manager set are kept.
	ExternalCloudProvider bool
	// UpdatePodCIDR hands the node's spec.podCIDRs (comma separated) to the
	// runtime when they are set, before every status update, as upstream's
	// updatePodCIDR; it reports whether they changed (the status is then
	// patched). Optional.
	UpdatePodCIDR func(ctx context.Context, cidrs string) (bool, error)
	// DoNotRegister (--register-node=false): the kubelet does not create its
	// Node; it waits until the Node exists, then updates its status and Lease.
	DoNotRegister bool
	// Registerer receives upstream's kubelet_node_startup_* gauges; nil: not
	// registered.
	Registerer prometheus.Registerer
	// StartTime is when the kubelet started and BootTime when the machine
	// booted (zero: unknown), for the node startup gauges. Zero StartTime:
	// when New is called.
	StartTime, BootTime time.Time
}

// Controller registers the node and keeps its status and Lease current. Create it
// with New and start it with Run.
type Controller struct {
	opts  Options
	log   *zap.Logger
	clock clock.Clock
	loops lifecycle.Loops // what Start began
	// lookupIP and defaultRouteIP detect the node IP (replaced in tests).
	lookupIP       func(name string) ([]net.IP, error)
	defaultRouteIP func(family net.IP) (net.IP, error)
	localIP        func(ip net.IP) error

	known *Known // the node as last read from or written to the API server

	// Owned by the goroutine running Run (setters run there only).
	lastReport        time.Time
	reportDelay       time.Duration
	lastUnschedulable bool
	runtimeName       string
	rebootRecorded    bool

	startup *startupTracker
}

// New validates opts, applies the defaults and wires a Controller; it starts nothing.
func New(opts Options) (*Controller, error) {
	if opts.Client == nil {
		return nil, errors.New("nodestatus: Client is required")
	}
	if opts.NodeName == "" {
		return nil, errors.New("nodestatus: NodeName is required")
	}
	if opts.Resources == nil {
		return nil, errors.New("nodestatus: Resources is required")
	}
	applyDefaults(&opts)
	if opts.LeaseDuration < time.Second {
		return nil, fmt.Errorf("nodestatus: LeaseDuration %s is shorter than 1s", opts.LeaseDuration)
	}
	if len(opts.NodeIPs) > 2 {
		return nil, fmt.Errorf("nodestatus: at most two NodeIPs (one per family), got %d", len(opts.NodeIPs))
	}
	if opts.StartTime.IsZero() {
		opts.StartTime = opts.Clock.Now()
	}
	startup, err := newStartupTracker(opts.Registerer, opts.Clock, opts.BootTime, opts.StartTime)
	if err != nil {
		return nil, err
	}
	return &Controller{
		startup:        startup,
		opts:           opts,
		log:            opts.Logger,
		clock:          opts.Clock,
		lookupIP:       net.LookupIP,
		defaultRouteIP: defaultRouteIP,
		localIP:        onLocalInterface,
		known:          opts.Known,
	}, nil
}

func applyDefaults(opts *Options) {
	if opts.Known == nil {
		opts.Known = NewKnown()
	}
	if opts.Hostname == "" {
		opts.Hostname = opts.NodeName
	}
	if opts.KubeletPort <= 0 {
		opts.KubeletPort = DefaultKubeletPort
	}
	if opts.StatusUpdateFrequency <= 0 {
		opts.StatusUpdateFrequency = DefaultStatusUpdateFrequency
	}
	if opts.StatusReportFrequency <= 0 {
		opts.StatusReportFrequency = DefaultStatusReportFrequency
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = DefaultLeaseDuration
	}
	if opts.Readiness == nil {
		opts.Readiness = func() error { return nil }
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
}

// Node returns a copy of the last node read from or written to the API
// server; false before the first (Options.Known).
func (c *Controller) Node() (*v1.Node, bool) { return c.known.Node() }

// Registered reports whether the node has been registered (created, or found and
// reconciled) with the API server.
func (c *Controller) Registered() bool { return c.known.Registered() }
