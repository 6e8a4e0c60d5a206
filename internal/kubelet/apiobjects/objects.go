// Package apiobjects gives the kubelet read access to the API objects its pods
// reference: configMaps and secrets (kept by the change detection strategy:
// a watch per referenced object, a cache with the Node's time-to-live, or a
// GET per read, as upstream's object managers), service
// account tokens (TokenRequest), services (an informer over all namespaces,
// for the service-link environment variables) and ClusterTrustBundles (an
// informer started at the first clusterTrustBundle projection).
//
// Only internal/app may import it: it builds one Objects from the kubelet's
// client and hands it to internal/kubelet and internal/kubelet/volumes, which
// declare the small interfaces they use.
package apiobjects

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// The change detection strategies of configMaps and secrets
// (configMapAndSecretChangeDetectionStrategy).
const (
	StrategyWatch = "Watch"
	StrategyCache = "Cache"
	StrategyGet   = "Get"
)

// Options configures Objects.
type Options struct {
	// Client is the kubelet's client (required).
	Client kubernetes.Interface
	// Strategy is how configMaps and secrets the pods reference are kept:
	// Watch (the default: a watch of each object), Cache (reads reused for
	// the Node's time-to-live) or Get (every read from the API server).
	Strategy string
	// SyncFrequency is the kubelet's syncFrequency: a watch nobody read for
	// five times as long (a minute at least) stops until the next read.
	// 0 = a minute.
	SyncFrequency time.Duration
	// Clock drives the cache expiry and idle watches; nil = the real clock.
	Clock clock.Clock
	// Logger; nil = zap.NewNop().
	Logger *zap.Logger
}

// Objects reads configMaps, secrets and services and requests tokens for the
// kubelet. Its methods are safe for concurrent use. The objects it returns are
// the caller's own copies, except ListServices' (shared with the informer: do
// not modify them).
type Objects struct {
	client     kubernetes.Interface
	logger     *zap.Logger
	loops      lifecycle.Loops // what Start began
	configMaps *objectManager
	secrets    *objectManager
	watches    []*watchStore // the Watch strategy's stores
	factory    informers.SharedInformerFactory
	services   cache.SharedIndexInformer
	lister     corelisters.ServiceLister

	nodeMu          sync.Mutex
	nodeAnnotations func() (map[string]string, bool) // the Cache strategy's time-to-live source

	runMu  sync.Mutex
	runCtx context.Context // run's: informers added later (ClusterTrustBundles) run under it
}

// Upstream's resource names, in "not found" and cache sync messages.
var (
	configMapResource = schema.GroupResource{Resource: "configmap"}
	secretResource    = schema.GroupResource{Resource: "secret"}
)

// New wires Objects; it starts nothing (see Start).
func New(opts Options) (*Objects, error) {
	if opts.Client == nil {
		return nil, errors.New("apiobjects: Client is required")
	}
	if opts.Strategy == "" {
		opts.Strategy = StrategyWatch
	}
	if opts.SyncFrequency <= 0 {
		opts.SyncFrequency = time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	factory := informers.NewSharedInformerFactory(opts.Client, 0)
	svc := factory.Core().V1().Services()
	o := &Objects{
		client:   opts.Client,
		logger:   opts.Logger.Named("apiobjects"),
		factory:  factory,
		services: svc.Informer(), // registers the informer; Start starts it
		lister:   svc.Lister(),
	}
	kinds := coreKinds(opts.Client)
	stores := make([]objectStore, len(kinds))
	for i, k := range kinds {
		switch opts.Strategy {
		case StrategyWatch:
			w := newWatchStore(listWatchFuncs{list: k.list, watch: k.watch, client: opts.Client}, k.newObject, k.immutable,
				k.gr, opts.Clock, 5*opts.SyncFrequency, o.logger)
			o.watches = append(o.watches, w)
			stores[i] = w
		case StrategyCache:
			stores[i] = newTTLStore(k.get, opts.Clock, nodeObjectTTL(o.annotations))
		case StrategyGet:
		default:
			return nil, fmt.Errorf("unknown configmap and secret manager mode: %v", opts.Strategy)
		}
	}
	o.configMaps = newObjectManager(stores[0], kinds[0].names, kinds[0].get, o.logger)
	o.secrets = newObjectManager(stores[1], kinds[1].names, kinds[1].get, o.logger)
	return o, nil
}

// SetNodeAnnotations gives the Cache strategy the Node's annotations (its
// node.alpha.kubernetes.io/ttl); without them reads are reused a minute.
func (o *Objects) SetNodeAnnotations(fn func() (map[string]string, bool)) {
	o.nodeMu.Lock()
	defer o.nodeMu.Unlock()
	o.nodeAnnotations = fn
}

func (o *Objects) annotations() (map[string]string, bool) {
	o.nodeMu.Lock()
	fn := o.nodeAnnotations
	o.nodeMu.Unlock()
	if fn == nil {
		return nil, false
	}
	return fn()
}

// RegisterPod records the configMaps and secrets pod references (the
// kubelet registers a pod at each sync, as upstream's): with the Watch
// strategy each is watched from now on; with Cache, the last read of one
// newly referenced is forgotten.
func (o *Objects) RegisterPod(pod *v1.Pod) {
	o.configMaps.register(pod)
	o.secrets.register(pod)
}

// UnregisterPod drops what RegisterPod recorded of pod (its volumes torn
// down).
func (o *Objects) UnregisterPod(pod *v1.Pod) {
	o.configMaps.unregister(pod)
	o.secrets.unregister(pod)
}

// Start runs the services informer (all namespaces) and, with the Watch
// strategy, the idle-watch recycling in the background until ctx ends (Wait
// waits for them and for the object watches).
func (o *Objects) Start(ctx context.Context) error {
	o.loops.Go(o.logger, "services informer", func() { o.run(ctx) })
	for _, w := range o.watches {
		o.loops.Go(o.logger, "object watches", func() { w.run(ctx) })
	}
	return nil
}

// Wait returns once the loops Start began have ended.
func (o *Objects) Wait() { o.loops.Wait() }

// run runs the services informer (all namespaces) until ctx ends, then waits
// for it to stop.
func (o *Objects) run(ctx context.Context) {
	o.logger.Info("starting the services informer")
	o.runMu.Lock()
	o.runCtx = ctx
	o.runMu.Unlock()
	o.factory.StartWithContext(ctx)
	<-ctx.Done()
	o.factory.Shutdown()
	o.logger.Info("services informer stopped")
}

// HasSynced reports whether the services informer has completed its first list.
func (o *Objects) HasSynced() bool { return o.services.HasSynced() }

// ListServices returns the services of namespace known to the informer (empty
// before the first list; see HasSynced). The services are shared: do not
// modify them.
func (o *Objects) ListServices(namespace string) ([]*v1.Service, error) {
	list, err := o.lister.Services(namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list services of namespace %q: %w", namespace, err)
	}
	return list, nil
}

// GetConfigMap returns the configMap namespace/name as the strategy keeps
// it. A missing configMap is an apierrors NotFound error (`configmap "name"
// not found`, as upstream's kubelet words it).
func (o *Objects) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, err := o.configMaps.get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	cm, ok := obj.(*v1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("configmap %s/%s: unexpected object %T", namespace, name, obj)
	}
	return cm.DeepCopy(), nil
}

// GetSecret returns the secret namespace/name as the strategy keeps it. A
// missing secret is an apierrors NotFound error (`secret "name" not found`).
func (o *Objects) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	obj, err := o.secrets.get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	s, ok := obj.(*v1.Secret)
	if !ok {
		return nil, fmt.Errorf("secret %s/%s: unexpected object %T", namespace, name, obj)
	}
	return s.DeepCopy(), nil
}

// CreateToken requests a token for the service account namespace/sa
// (TokenRequest); it is not cached.
func (o *Objects) CreateToken(ctx context.Context, namespace, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	if req == nil {
		return nil, errors.New("create token: nil TokenRequest")
	}
	tr, err := o.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create token for service account %s/%s: %w", namespace, sa, err)
	}
	return tr, nil
}

// GetPersistentVolumeClaim reads the claim namespace/name from the API server
// (not cached: a claim's binding is what a pod waits for). Errors are the
// API's.
func (o *Objects) GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error) {
	return o.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// GetPersistentVolume reads the persistent volume name from the API server
// (not cached). Errors are the API's.
func (o *Objects) GetPersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error) {
	return o.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// PatchPersistentVolumeClaimStatus applies a strategic merge patch to the
// claim's status (a node may change a claim's resize status and capacity
// for the volumes of its pods). Errors are the API's.
func (o *Objects) PatchPersistentVolumeClaimStatus(ctx context.Context, namespace, name string, patch []byte) (*v1.PersistentVolumeClaim, error) {
	return o.client.CoreV1().PersistentVolumeClaims(namespace).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
}

// normalizeErr turns NotFound into upstream's kubelet error for the object
// (resource "configmap" or "secret", unwrapped so its message reads
// `configmap "x" not found`) and wraps any other error with the object.
func normalizeErr(err error, gr schema.GroupResource, namespace, name string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return apierrors.NewNotFound(gr, name)
	default:
		return fmt.Errorf("get %s %s/%s: %w", gr.Resource, namespace, name, err)
	}
}

// objectKind is what the strategies need of configMaps or secrets: reads,
// lists and watches of a namespace, the empty object, whether one is
// immutable, and the names a pod references.
type objectKind struct {
	gr        schema.GroupResource
	get       getFunc
	list      func(ctx context.Context, namespace string, opts metav1.ListOptions) (runtime.Object, error)
	watch     func(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	newObject func() runtime.Object
	immutable func(runtime.Object) bool
	names     func(*v1.Pod) sets.Set[string]
}

// coreKinds are configMaps and secrets, in that order.
func coreKinds(client kubernetes.Interface) [2]objectKind {
	core := client.CoreV1()
	return [2]objectKind{{
		gr: configMapResource,
		get: func(ctx context.Context, namespace, name string, opts metav1.GetOptions) (runtime.Object, error) {
			cm, err := core.ConfigMaps(namespace).Get(ctx, name, opts)
			return cm, normalizeErr(err, configMapResource, namespace, name)
		},
		list: func(ctx context.Context, ns string, lo metav1.ListOptions) (runtime.Object, error) {
			return core.ConfigMaps(ns).List(ctx, lo)
		},
		watch: func(ctx context.Context, ns string, lo metav1.ListOptions) (watch.Interface, error) {
			return core.ConfigMaps(ns).Watch(ctx, lo)
		},
		newObject: func() runtime.Object { return &v1.ConfigMap{} },
		immutable: func(obj runtime.Object) bool {
			cm, ok := obj.(*v1.ConfigMap)
			return ok && ptr.Deref(cm.Immutable, false)
		},
		names: podConfigMapNames,
	}, {
		gr: secretResource,
		get: func(ctx context.Context, namespace, name string, opts metav1.GetOptions) (runtime.Object, error) {
			s, err := core.Secrets(namespace).Get(ctx, name, opts)
			return s, normalizeErr(err, secretResource, namespace, name)
		},
		list: func(ctx context.Context, ns string, lo metav1.ListOptions) (runtime.Object, error) {
			return core.Secrets(ns).List(ctx, lo)
		},
		watch: func(ctx context.Context, ns string, lo metav1.ListOptions) (watch.Interface, error) {
			return core.Secrets(ns).Watch(ctx, lo)
		},
		newObject: func() runtime.Object { return &v1.Secret{} },
		immutable: func(obj runtime.Object) bool {
			s, ok := obj.(*v1.Secret)
			return ok && ptr.Deref(s.Immutable, false)
		},
		names: podSecretNames,
	}}
}
