package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/component-base/tracing"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	internalapi "k8s.io/cri-api/pkg/apis"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/features"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/apiobjects"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodestatus"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodestatus/clientcert"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/stats"
)

// apiConn is the node's connection to its API server; nil for a standalone
// kubelet (no --kubeconfig).
type apiConn struct {
	client      kubernetes.Interface
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	// objects reads configMaps, secrets, tokens and services for the pods.
	objects *apiobjects.Objects
}

// connectAPIServer TLS-bootstraps when needed (--bootstrap-kubeconfig), then
// builds the client from --kubeconfig with client certificate rotation, and
// the event recorder. It returns nil without --kubeconfig.
func connectAPIServer(ctx context.Context, cfg *Config, nodeName string, reg prometheus.Registerer, tp trace.TracerProvider, logger *zap.Logger) (*apiConn, error) {
	if cfg.Kubeconfig == "" {
		if cfg.BootstrapKubeconfig != "" {
			return nil, fmt.Errorf("--bootstrap-kubeconfig=%s needs --kubeconfig (where the bootstrapped credentials are written)", cfg.BootstrapKubeconfig)
		}
		return nil, nil
	}
	opts := clientcert.Options{
		KubeconfigPath: cfg.Kubeconfig, BootstrapKubeconfigPath: cfg.BootstrapKubeconfig,
		CertDir: cfg.CertDirectory, NodeName: nodeName,
		RotateCertificates: cfg.Kubelet.RotateCertificates, Registerer: reg, Logger: logger.Named("clientcert"),
	}
	if err := clientcert.Bootstrap(ctx, opts); err != nil {
		return nil, fmt.Errorf("TLS bootstrap: %w", err)
	}
	restCfg, err := clientcert.NewClientConfig(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig=%s: %w", cfg.Kubeconfig, err)
	}
	if tp != nil { // the API requests' spans, children of the caller's (upstream's WrapperFor)
		restCfg.Wrap(tracing.WrapperFor(tp))
	}
	restCfg.QPS = float32(*cfg.Kubelet.KubeAPIQPS)
	restCfg.Burst = int(cfg.Kubelet.KubeAPIBurst)
	restCfg.ContentType = cfg.Kubelet.ContentType
	restCfg.UserAgent = "kubelet/" + cfg.ReportedVersion + " (linux) kubelet-dockershim"
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("API client: %w", err)
	}
	// Events go through their own client, throttled by eventRecordQPS and
	// eventBurst (0 QPS: no limit), as upstream.
	eventCfg := rest.CopyConfig(restCfg)
	eventCfg.QPS, eventCfg.Burst = float32(*cfg.Kubelet.EventRecordQPS), int(cfg.Kubelet.EventBurst)
	if eventCfg.QPS == 0 {
		eventCfg.QPS = -1
	}
	events, err := typedcorev1.NewForConfig(eventCfg)
	if err != nil {
		return nil, fmt.Errorf("event client: %w", err)
	}
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartStructuredLogging(3)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: events.Events("")})
	rec := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: nodeName})
	objs, err := apiobjects.New(apiobjects.Options{Client: client, Strategy: string(cfg.Kubelet.ConfigMapAndSecretChangeDetectionStrategy),
		SyncFrequency: cfg.Kubelet.SyncFrequency.Duration, Logger: logger.Named("apiobjects")})
	if err != nil {
		b.Shutdown()
		return nil, err
	}
	logger.Info("connected to the API server", zap.String("host", restCfg.Host), zap.String("node", nodeName))
	return &apiConn{client: client, broadcaster: b, recorder: rec, objects: objs}, nil
}

// close stops the event broadcaster (events still queued are dropped).
func (c *apiConn) close() {
	if c != nil {
		c.broadcaster.Shutdown()
	}
}

// eventRecorder is the kubelet's one event recorder, about pods and about
// the node alike: every event is logged and, with an API server, recorded
// there (but not about a pod without a UID: the stub of a manifest that
// could not be read). An event about a nil pod is dropped.
type eventRecorder struct {
	conn   *apiConn // nil: standalone
	logger *zap.Logger
}

var _ record.EventRecorder = eventRecorder{}

func (r eventRecorder) Event(object runtime.Object, eventType, reason, message string) {
	r.record(object, nil, eventType, reason, message)
}

func (r eventRecorder) Eventf(object runtime.Object, eventType, reason, format string, args ...any) {
	r.record(object, nil, eventType, reason, fmt.Sprintf(format, args...))
}

func (r eventRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventType, reason, format string, args ...any) {
	r.record(object, annotations, eventType, reason, fmt.Sprintf(format, args...))
}

func (r eventRecorder) record(object runtime.Object, annotations map[string]string, eventType, reason, message string) {
	fields := make([]zap.Field, 0, 5)
	send := r.conn != nil
	switch o := object.(type) {
	case *v1.Pod:
		if o == nil { // a runtime pod the kubelet no longer knows: no object
			return
		}
		fields = append(fields, zap.String("pod", o.Namespace+"/"+o.Name))
		send = send && o.UID != ""
	case *v1.ObjectReference:
		fields = append(fields, zap.String(strings.ToLower(o.Kind), o.Name))
	}
	fields = append(fields, zap.String("type", eventType), zap.String("reason", reason), zap.String("message", message))
	if len(annotations) > 0 {
		fields = append(fields, zap.Any("annotations", annotations))
	}
	r.logger.Info("event", fields...)
	if send {
		r.conn.recorder.AnnotatedEventf(object, annotations, eventType, reason, "%s", message)
	}
}

// nodeReference is the object of the events about the node itself (no UID,
// as upstream's).
func nodeReference(nodeName string) *v1.ObjectReference {
	return &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: nodeName}
}

// nodeReservations are systemReserved and kubeReserved parsed once; a list
// is nil when the field is not set.
type nodeReservations struct {
	system, kube v1.ResourceList
}

// allocatable is capacity less systemReserved and kubeReserved, each
// resource floored at 0: upstream's absolute node allocatable (no eviction
// threshold), the node-allocatable cgroup's limits.
func (r nodeReservations) allocatable(capacity v1.ResourceList) v1.ResourceList {
	out := capacity.DeepCopy()
	for _, rl := range []v1.ResourceList{r.system, r.kube} {
		for name, q := range rl {
			if c, ok := out[name]; ok {
				c.Sub(q)
				if c.Sign() < 0 {
					c.Set(0)
				}
				out[name] = c
			}
		}
	}
	return out
}

// parseReservations parses systemReserved and kubeReserved (name -> quantity).
func parseReservations(k *kubeletv1beta1.KubeletConfiguration) (nodeReservations, error) {
	var out nodeReservations
	for _, f := range []struct {
		field string
		in    map[string]string
		dst   *v1.ResourceList
	}{{"systemReserved", k.SystemReserved, &out.system}, {"kubeReserved", k.KubeReserved, &out.kube}} {
		if f.in == nil {
			continue
		}
		*f.dst = v1.ResourceList{}
		for name, value := range f.in {
			q, err := resource.ParseQuantity(value)
			if err != nil {
				return out, fmt.Errorf("%s[%s]: %w", f.field, name, err)
			}
			(*f.dst)[v1.ResourceName(name)] = q
		}
	}
	return out, nil
}

// runtimeVersion adapts the CRI runtime's Version to nodestatus.RuntimeInfo.
type runtimeVersion struct{ rt internalapi.RuntimeService }

func (r runtimeVersion) Version(ctx context.Context) (string, string, error) {
	v, err := r.rt.Version(ctx, "v1")
	if err != nil {
		return "", "", err
	}
	return v.RuntimeName, v.RuntimeVersion, nil
}

// newNodeStatus builds the node registration, status and Lease controller
// over the node's resources and the runtime's health.
func newNodeStatus(cfg *Config, conn *apiConn, clients *criClients, n *node, logger *zap.Logger) (*nodestatus.Controller, error) {
	external := cfg.CloudProvider == "external"
	ips := n.ips
	if cfg.NodeIP == "" {
		// As upstream: without --node-ip the addresses are detected at each
		// status update (or, with an external cloud provider, set by the
		// cloud controller manager).
		ips = nil
	}
	return nodestatus.New(nodestatus.Options{
		Client: conn.client, NodeName: n.name, Known: n.known, Hostname: n.name, NodeIPs: ips,
		ProviderID: cfg.Kubelet.ProviderID, NoControllerAttachDetach: !*cfg.Kubelet.EnableControllerAttachDetach,
		ExternalCloudProvider: external, UpdatePodCIDR: n.podCIDR.update,
		Labels: cfg.NodeLabels, Taints: cfg.Kubelet.RegisterWithTaints, DoNotRegister: !*cfg.Kubelet.RegisterNode,
		Resources: n.resources, Pressure: n.eviction, Images: n.images, MaxImages: int(*cfg.Kubelet.NodeStatusMaxImages),
		Runtime: runtimeVersion{rt: clients.runtime}, RuntimeHandlers: n.state, Readiness: func() error {
			if err := n.state.ReadinessError(); err != nil {
				return err
			}
			return n.shutdown.ShutdownStatus()
		}, KubeletVersion: cfg.ReportedVersion, DeclaredFeatures: n.features.Names(), RunningInUserNamespace: runningInUserNamespace(cfg),
		KubeletPort: int(cfg.Kubelet.Port), StatusUpdateFrequency: cfg.Kubelet.NodeStatusUpdateFrequency.Duration,
		StatusReportFrequency: cfg.Kubelet.NodeStatusReportFrequency.Duration,
		LeaseDuration:         time.Duration(cfg.Kubelet.NodeLeaseDurationSeconds) * time.Second,
		Recorder:              n.recorder,
		Registerer:            n.reg, BootTime: bootTime(),
		Logger: logger.Named("nodestatus"),
	})
}

// runningInUserNamespace is nodeInfo.runningInUserNamespace: with the
// KubeletInUserNamespace gate, whether this process runs in a user namespace.
func runningInUserNamespace(cfg *Config) *bool {
	if !cfg.enabled(features.KubeletInUserNamespace) {
		return nil
	}
	in := runningInUserNS(realHostFiles.UIDMap)
	return &in
}

// bootTime is when the machine booted, zero when it cannot be read (the node
// startup metrics that need it are then not set, as upstream's).
func bootTime() time.Time {
	t, err := stats.BootTime(time.Now())
	if err != nil {
		return time.Time{}
	}
	return t
}
