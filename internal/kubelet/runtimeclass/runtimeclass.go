// Package runtimeclass resolves a pod's runtimeClassName to the CRI runtime
// handler its sandbox runs with (upstream's pkg/kubelet/runtimeclass): the
// handler field of the RuntimeClass object (node.k8s.io/v1) of that name, from
// an informer started at the first lookup of a non-empty name (a node whose
// pods name no RuntimeClass never watches them).
package runtimeclass

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	nodelisters "k8s.io/client-go/listers/node/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// DefaultSyncTimeout bounds a lookup's wait for the informer's first list.
const DefaultSyncTimeout = 30 * time.Second

// Options configures a Manager.
type Options struct {
	// Client lists and watches RuntimeClasses. Required.
	Client kubernetes.Interface
	// SyncTimeout; 0 = DefaultSyncTimeout.
	SyncTimeout time.Duration
	// Logger; nil = no logging.
	Logger *zap.Logger
}

// Manager looks up RuntimeClasses. Safe for concurrent use.
type Manager struct {
	factory     informers.SharedInformerFactory
	informer    cache.SharedIndexInformer
	lister      nodelisters.RuntimeClassLister
	syncTimeout time.Duration
	logger      *zap.Logger
	loops       lifecycle.Loops

	mu       sync.Mutex
	runCtx   context.Context // Start's; nil before it
	watching bool
}

// New returns a Manager; it does no I/O.
func New(opts Options) (*Manager, error) {
	if opts.Client == nil {
		return nil, errors.New("runtimeclass: Client is required")
	}
	if opts.SyncTimeout < 0 {
		return nil, fmt.Errorf("runtimeclass: negative SyncTimeout %s", opts.SyncTimeout)
	}
	if opts.SyncTimeout == 0 {
		opts.SyncTimeout = DefaultSyncTimeout
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	factory := informers.NewSharedInformerFactory(opts.Client, 0)
	rcs := factory.Node().V1().RuntimeClasses()
	return &Manager{factory: factory, informer: rcs.Informer(), lister: rcs.Lister(), syncTimeout: opts.SyncTimeout,
		logger: opts.Logger.Named("runtimeclass")}, nil
}

// Start lets lookups start the informer, which runs until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	m.runCtx = ctx
	m.mu.Unlock()
	m.loops.Go(m.logger, "runtime class informer", func() {
		<-ctx.Done()
		m.factory.Shutdown()
	})
	return nil
}

// Wait returns once the informer has stopped.
func (m *Manager) Wait() { m.loops.Wait() }

// LookupRuntimeHandler returns the handler of the RuntimeClass name: "" for
// none (nil or empty: the runtime's default). A RuntimeClass that does not
// exist gives the API's NotFound error (`runtimeclass.node.k8s.io "x" not
// found`), as upstream.
func (m *Manager) LookupRuntimeHandler(ctx context.Context, name *string) (string, error) {
	if name == nil || *name == "" {
		return "", nil
	}
	m.mu.Lock()
	runCtx := m.runCtx
	if runCtx != nil && !m.watching {
		m.logger.Info("starting the RuntimeClass informer")
		m.factory.StartWithContext(runCtx)
		m.watching = true
	}
	m.mu.Unlock()
	if runCtx == nil {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: the RuntimeClass informer is not running", *name)
	}
	ctx, cancel := context.WithTimeout(ctx, m.syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), m.informer.HasSynced) {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: the RuntimeClass informer has not synced yet", *name)
	}
	rc, err := m.lister.Get(*name)
	if apierrors.IsNotFound(err) {
		return "", err
	}
	if err != nil {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", *name, err)
	}
	return rc.Handler, nil
}
