// Package podcerts provides the credentials of podCertificate projected volume
// sources (upstream's pkg/kubelet/podcertificate): for each such projection of
// a pod on this node it generates a private key of the projection's keyType,
// creates a PodCertificateRequest (certificates.k8s.io/v1) for the pod's
// signer, waits for the signer to issue, deny or fail it, and from the
// certificate's beginRefreshAt on requests its successor, keeping the current
// certificate until that one is issued. Nothing is kept across restarts: after
// one, every projection is requested anew.
package podcerts

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// Defaults of Options.
const (
	// DefaultRefreshPeriod is how often every projection is looked at again
	// (with up to as much again of jitter), as upstream's refresh pass.
	DefaultRefreshPeriod = time.Minute
	// DefaultIssueWait bounds how long CredentialBundle waits for a first
	// certificate: upstream's pod worker waits as long for a pod's volumes.
	DefaultIssueWait = 2 * time.Minute
)

// Pods gives the pods bound to this node (the pod manager).
type Pods interface {
	Get(uid types.UID) (*v1.Pod, bool)
}

// Options configures a Manager.
type Options struct {
	// Client creates PodCertificateRequests, reads service accounts and
	// watches the node's requests. Required.
	Client kubernetes.Interface
	// NodeName is this node's name. Required.
	NodeName string
	// Node returns the Node object as last known (the requests carry its
	// UID). Required.
	Node func() (*v1.Node, bool)
	// Pods gives the pods of the projections. Required.
	Pods Pods
	// Recorder receives the warnings about a pod's certificates; nil: none.
	Recorder record.EventRecorder
	// Registerer receives kubelet_podcertificate_states; nil: not registered.
	Registerer prometheus.Registerer
	// Clock; nil = the real clock.
	Clock clock.PassiveClock
	// RefreshPeriod; 0 = DefaultRefreshPeriod.
	RefreshPeriod time.Duration
	// IssueWait; 0 = DefaultIssueWait.
	IssueWait time.Duration
	// Logger; nil = no logging.
	Logger *zap.Logger
}

// projection names one podCertificate source: the pod, the volume and the
// source's index in the volume's sources.
type projection struct {
	namespace, pod string
	uid            types.UID
	volume         string
	index          int
}

// tracked is the state of one projection and the signer it asks (the metric's
// label).
type tracked struct {
	signer string
	state  state
}

// Manager tracks the podCertificate projections of the node's pods. A
// projection is tracked from the first CredentialBundle for it until its pod
// is gone. Safe for concurrent use.
type Manager struct {
	client        kubernetes.Interface
	nodeName      string
	node          func() (*v1.Node, bool)
	pods          Pods
	recorder      record.EventRecorder // nil: none
	clock         clock.PassiveClock
	refreshPeriod time.Duration
	issueWait     time.Duration
	logger        *zap.Logger

	// queue holds the projections to look at; one worker handles them, so a
	// projection's state is only advanced by that worker.
	queue workqueue.TypedRateLimitingInterface[projection]
	// The node's PodCertificateRequests (a field selector on spec.nodeName),
	// started at the first projection.
	factory  informers.SharedInformerFactory
	requests cache.SharedIndexInformer
	lister   certlisters.PodCertificateRequestLister

	mu       sync.Mutex
	records  map[projection]*tracked
	changed  chan struct{}   // closed and replaced when a state changes
	runCtx   context.Context // Start's; nil before it
	watching bool            // the informer is started
	loops    lifecycle.Loops // what Start began
}

// New returns a Manager; it checks opts and does no I/O.
func New(opts Options) (*Manager, error) {
	switch {
	case opts.Client == nil:
		return nil, errors.New("podcerts: Client is required")
	case opts.NodeName == "":
		return nil, errors.New("podcerts: NodeName is required")
	case opts.Node == nil:
		return nil, errors.New("podcerts: Node is required")
	case opts.Pods == nil:
		return nil, errors.New("podcerts: Pods is required")
	case opts.RefreshPeriod < 0 || opts.IssueWait < 0:
		return nil, errors.New("podcerts: negative RefreshPeriod or IssueWait")
	}
	m := &Manager{
		client: opts.Client, nodeName: opts.NodeName, node: opts.Node, pods: opts.Pods, recorder: opts.Recorder,
		clock: opts.Clock, refreshPeriod: opts.RefreshPeriod, issueWait: opts.IssueWait, logger: opts.Logger,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[projection]()),
		factory: informers.NewSharedInformerFactoryWithOptions(opts.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", opts.NodeName).String()
		})),
		records: map[projection]*tracked{},
		changed: make(chan struct{}),
	}
	if m.clock == nil {
		m.clock = clock.RealClock{}
	}
	if m.refreshPeriod == 0 {
		m.refreshPeriod = DefaultRefreshPeriod
	}
	if m.issueWait == 0 {
		m.issueWait = DefaultIssueWait
	}
	if m.logger == nil {
		m.logger = zap.NewNop()
	}
	m.logger = m.logger.Named("podcerts")
	pcrs := m.factory.Certificates().V1().PodCertificateRequests()
	m.requests, m.lister = pcrs.Informer(), pcrs.Lister()
	// Any change of a request brings its pod's projections to the worker at
	// once (the refresh pass would too, later).
	onChange := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if pcr, ok := obj.(*certificatesv1.PodCertificateRequest); ok {
			m.queuePod(pcr.Spec.PodUID)
		}
	}
	if _, err := m.requests.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onChange, UpdateFunc: func(_, obj any) { onChange(obj) }, DeleteFunc: onChange,
	}); err != nil {
		return nil, fmt.Errorf("podcerts: %w", err)
	}
	if opts.Registerer != nil {
		if err := opts.Registerer.Register(statesCollector{m}); err != nil {
			return nil, fmt.Errorf("podcerts: register kubelet_podcertificate_states: %w", err)
		}
	}
	return m, nil
}

// Start begins the worker and the refresh pass; the informer starts at the
// first projection. Both end with ctx.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	m.runCtx = ctx
	m.mu.Unlock()
	m.loops.Go(m.logger, "pod certificate worker", func() {
		for m.next(ctx) {
		}
	})
	m.loops.Go(m.logger, "pod certificate refresh", func() {
		wait.JitterUntilWithContext(ctx, m.refresh, m.refreshPeriod, 1.0, false)
		m.queue.ShutDown()
		m.factory.Shutdown()
	})
	return nil
}

// Wait returns once the loops Start began have ended.
func (m *Manager) Wait() { m.loops.Wait() }

// CredentialBundle returns the PEM private key and certificate chain of the
// podCertificate source at index of pod's volume, tracking the projection
// from its first call. Until the first certificate is issued it waits, at
// most IssueWait, then fails with "credential bundle is not issued yet"; a
// denied or failed request gives its reason and message.
func (m *Manager) CredentialBundle(ctx context.Context, pod *v1.Pod, volume string, index int, signer string) (key, chain []byte, err error) {
	p := projection{namespace: pod.Namespace, pod: pod.Name, uid: pod.UID, volume: volume, index: index}
	m.mu.Lock()
	if m.runCtx == nil {
		m.mu.Unlock()
		return nil, nil, errors.New("the pod certificate manager is not running")
	}
	if !m.watching {
		m.logger.Info("starting the PodCertificateRequest informer", zap.String("node", m.nodeName))
		m.factory.StartWithContext(m.runCtx)
		m.watching = true
	}
	rec, ok := m.records[p]
	if !ok {
		rec = &tracked{signer: signer}
		m.records[p] = rec
		m.queue.Add(p)
	}
	m.mu.Unlock()

	timer := time.NewTimer(m.issueWait)
	defer timer.Stop()
	for {
		m.mu.Lock()
		key, chain, waiting, err := rec.state.bundle()
		changed := m.changed
		m.mu.Unlock()
		if !waiting {
			return key, chain, err
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, nil, err
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("%w: %w", err, ctx.Err())
		}
	}
}

// queuePod queues the tracked projections of the pod with uid.
func (m *Manager) queuePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.records {
		if p.uid == uid {
			m.queue.Add(p)
		}
	}
}

// refresh queues every tracked projection and forgets those whose pod is gone.
func (m *Manager) refresh(context.Context) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.records {
		if _, ok := m.pods.Get(p.uid); !ok {
			delete(m.records, p)
			continue
		}
		m.queue.Add(p)
	}
}

// next handles one queued projection; false once the queue is shut down.
func (m *Manager) next(ctx context.Context) bool {
	p, quit := m.queue.Get()
	if quit {
		return false
	}
	defer m.queue.Done(p)
	if err := m.handle(ctx, p); err != nil {
		m.logger.Warn("Could not advance a podCertificate projection; will retry", zap.String("pod", p.namespace+"/"+p.pod),
			zap.String("volume", p.volume), zap.Int("sourceIndex", p.index), zap.Error(err))
		m.queue.AddRateLimited(p)
		return true
	}
	m.queue.Forget(p)
	return true
}

// handle advances one projection's state and stores the result.
func (m *Manager) handle(ctx context.Context, p projection) error {
	pod, ok := m.pods.Get(p.uid)
	if !ok {
		m.forget(p.uid)
		return nil
	}
	src := sourceOf(pod, p.volume, p.index)
	if src == nil {
		m.logger.Error("The pod has no such podCertificate source", zap.String("pod", p.namespace+"/"+p.pod),
			zap.String("volume", p.volume), zap.Int("sourceIndex", p.index))
		return nil
	}
	m.mu.Lock()
	rec := m.records[p]
	var cur state
	if rec != nil {
		cur = rec.state
	}
	m.mu.Unlock()
	if rec == nil {
		return nil
	}
	next, err := m.advance(ctx, pod, src, cur)
	m.mu.Lock()
	if m.records[p] == rec {
		rec.state = next
		if next.phase != cur.phase {
			close(m.changed)
			m.changed = make(chan struct{})
		}
	}
	m.mu.Unlock()
	return err
}

// forget drops the projections of the pod with uid.
func (m *Manager) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p := range m.records {
		if p.uid == uid {
			delete(m.records, p)
		}
	}
}

// sourceOf returns the podCertificate source at index of pod's volume.
func sourceOf(pod *v1.Pod, volume string, index int) *v1.PodCertificateProjection {
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.Name != volume || vol.Projected == nil || index < 0 || index >= len(vol.Projected.Sources) {
			continue
		}
		return vol.Projected.Sources[index].PodCertificate
	}
	return nil
}
