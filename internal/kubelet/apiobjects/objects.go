// Package apiobjects gives the kubelet read access to the API objects its pods
// reference: configMaps and secrets (GET through a short TTL cache), service
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// DefaultCacheTTL is how long a configMap or secret read is reused.
const DefaultCacheTTL = 5 * time.Second

// Options configures Objects.
type Options struct {
	// Client is the kubelet's client (required).
	Client kubernetes.Interface
	// CacheTTL is how long a configMap or secret (or its absence) is reused
	// before the next read goes to the API server; 0 = DefaultCacheTTL.
	CacheTTL time.Duration
	// Clock drives the cache expiry; nil = the real clock.
	Clock clock.PassiveClock
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
	configMaps *ttlCache[*v1.ConfigMap]
	secrets    *ttlCache[*v1.Secret]
	factory    informers.SharedInformerFactory
	services   cache.SharedIndexInformer
	lister     corelisters.ServiceLister

	runMu  sync.Mutex
	runCtx context.Context // run's: informers added later (ClusterTrustBundles) run under it
}

// New wires Objects; it starts nothing (see Run).
func New(opts Options) (*Objects, error) {
	if opts.Client == nil {
		return nil, errors.New("apiobjects: Client is required")
	}
	if opts.CacheTTL < 0 {
		return nil, fmt.Errorf("apiobjects: negative CacheTTL %s", opts.CacheTTL)
	}
	if opts.CacheTTL == 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	factory := informers.NewSharedInformerFactory(opts.Client, 0)
	svc := factory.Core().V1().Services()
	return &Objects{
		client:     opts.Client,
		logger:     opts.Logger.Named("apiobjects"),
		configMaps: newTTLCache[*v1.ConfigMap](opts.CacheTTL, opts.Clock),
		secrets:    newTTLCache[*v1.Secret](opts.CacheTTL, opts.Clock),
		factory:    factory,
		services:   svc.Informer(), // registers the informer; Run starts it
		lister:     svc.Lister(),
	}, nil
}

// Start runs the services informer (all namespaces) in the background until ctx
// ends (Wait waits for it).
func (o *Objects) Start(ctx context.Context) error {
	o.loops.Go(o.logger, "services informer", func() { o.run(ctx) })
	return nil
}

// Wait returns once the loop Start began has ended.
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

// GetConfigMap returns the configMap namespace/name, read at most CacheTTL ago.
// A missing configMap is an apierrors NotFound error (`configmap "name" not
// found`, as upstream's kubelet words it).
func (o *Objects) GetConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	cm, err := o.configMaps.get(ctx, namespace+"/"+name, func(ctx context.Context) (*v1.ConfigMap, error) {
		cm, err := o.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		return cm, normalizeErr(err, "configmap", namespace, name)
	})
	if err != nil {
		return nil, err
	}
	return cm.DeepCopy(), nil
}

// GetSecret returns the secret namespace/name, read at most CacheTTL ago. A
// missing secret is an apierrors NotFound error (`secret "name" not found`).
func (o *Objects) GetSecret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	s, err := o.secrets.get(ctx, namespace+"/"+name, func(ctx context.Context) (*v1.Secret, error) {
		s, err := o.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		return s, normalizeErr(err, "secret", namespace, name)
	})
	if err != nil {
		return nil, err
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
func normalizeErr(err error, resource, namespace, name string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err):
		return apierrors.NewNotFound(schema.GroupResource{Resource: resource}, name)
	default:
		return fmt.Errorf("get %s %s/%s: %w", resource, namespace, name, err)
	}
}
