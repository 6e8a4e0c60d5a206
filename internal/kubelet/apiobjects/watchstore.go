package apiobjects

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// objectStore keeps the objects that registered pods reference.
type objectStore interface {
	addReference(namespace, name string)
	deleteReference(namespace, name string)
	// get returns the object; errNotRegistered when no pod references it.
	get(ctx context.Context, namespace, name string) (runtime.Object, error)
}

// errNotRegistered is upstream's `object "ns"/"name" not registered`.
var errNotRegistered = errors.New("not registered")

type objectKey struct{ namespace, name string }

// listWatchFuncs list and watch the objects of a namespace.
type listWatchFuncs struct {
	list  func(ctx context.Context, namespace string, opts metav1.ListOptions) (runtime.Object, error)
	watch func(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	// client is the clientset: whether it supports the watch-list
	// semantics decides how the reflector lists (as upstream's managers).
	client any
}

// minIdleTime is the shortest time a watch of an object nobody reads is
// kept (upstream's).
const minIdleTime = time.Minute

// watchStore is upstream's Watch strategy: each referenced object has a
// reflector of its own (a list and watch of that one name), and reads come
// from its store. A watch not read for maxIdleTime stops and starts again
// at the next read; an immutable object's watch stops for good; the last
// reference gone, the object is dropped.
type watchStore struct {
	lw        listWatchFuncs
	newObject func() runtime.Object
	immutable func(runtime.Object) bool
	gr        schema.GroupResource
	clock     clock.Clock
	maxIdle   time.Duration
	logger    *zap.Logger
	runs      lifecycle.Loops // the reflectors running

	mu      sync.Mutex
	items   map[objectKey]*watchItem
	stopped bool // the kubelet is stopping: no reflector starts
}

func newWatchStore(lw listWatchFuncs, newObject func() runtime.Object, immutable func(runtime.Object) bool,
	gr schema.GroupResource, clk clock.Clock, maxIdle time.Duration, logger *zap.Logger) *watchStore {
	return &watchStore{lw: lw, newObject: newObject, immutable: immutable, gr: gr, clock: clk,
		maxIdle: max(maxIdle, minIdleTime), logger: logger, items: map[objectKey]*watchItem{}}
}

// watchItem is one object's reflector and store.
type watchItem struct {
	refs      int
	store     *syncedStore
	reflector *cache.Reflector

	mu         sync.Mutex
	lastAccess time.Time
	running    bool
	immutable  bool
	cancel     context.CancelFunc
	done       chan struct{} // closed when the last run has returned
}

// syncedStore is a store that knows whether its first list arrived.
type syncedStore struct {
	cache.Store
	mu     sync.Mutex
	synced bool
}

func (s *syncedStore) Replace(list []any, resourceVersion string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Store.Replace(list, resourceVersion); err != nil {
		return err
	}
	s.synced = true
	return nil
}

func (s *syncedStore) hasSynced() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced
}

func (s *syncedStore) unsync() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced = false
}

func (s *watchStore) addReference(namespace, name string) {
	k := objectKey{namespace, name}
	s.mu.Lock()
	defer s.mu.Unlock()
	item, ok := s.items[k]
	if !ok {
		item = s.newItem(namespace, name)
		s.items[k] = item
		if !s.stopped {
			s.startLocked(item)
		}
	}
	item.refs++
}

func (s *watchStore) deleteReference(namespace, name string) {
	k := objectKey{namespace, name}
	s.mu.Lock()
	defer s.mu.Unlock()
	item, ok := s.items[k]
	if !ok {
		return
	}
	if item.refs--; item.refs <= 0 {
		item.stop()
		delete(s.items, k)
	}
}

// newItem builds the reflector of one object: a list and watch of its
// namespace with a field selector on its name.
func (s *watchStore) newItem(namespace, name string) *watchItem {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return s.lw.list(ctx, namespace, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return s.lw.watch(ctx, namespace, opts)
		},
	}
	store := &syncedStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc)}
	r := cache.NewReflectorWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, s.lw.client), s.newObject(), store, cache.ReflectorOptions{
		Name:            fmt.Sprintf("object-%q/%q", namespace, name),
		MinWatchTimeout: 30 * time.Minute,
	})
	return &watchItem{store: store, reflector: r, lastAccess: s.clock.Now()}
}

// startLocked runs item's reflector unless it runs or the object is
// immutable (s.mu held). A new run waits for the last one to return.
func (s *watchStore) startLocked(item *watchItem) {
	item.mu.Lock()
	defer item.mu.Unlock()
	if item.running || item.immutable {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	prev, done := item.done, make(chan struct{})
	item.running, item.cancel, item.done = true, cancel, done
	s.runs.Go(s.logger, "object reflector", func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		item.reflector.RunWithContext(ctx)
	})
}

// stop ends item's reflector; a mutable object's store counts as not synced
// until the next run lists it again. It says whether it was running.
func (item *watchItem) stop() bool {
	item.mu.Lock()
	defer item.mu.Unlock()
	if !item.running {
		return false
	}
	item.running = false
	item.cancel()
	if !item.immutable {
		item.store.unsync()
	}
	return true
}

func (s *watchStore) get(ctx context.Context, namespace, name string) (runtime.Object, error) {
	s.mu.Lock()
	item, ok := s.items[objectKey{namespace, name}]
	if ok {
		item.mu.Lock()
		item.lastAccess = s.clock.Now()
		item.mu.Unlock()
		if !s.stopped {
			s.startLocked(item)
		}
	}
	s.mu.Unlock()
	if !ok {
		return nil, errNotRegistered
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Second, true, func(context.Context) (bool, error) {
		return item.store.hasSynced(), nil
	}); err != nil {
		return nil, fmt.Errorf("failed to sync %s cache: timed out waiting for the condition", s.gr.String())
	}
	obj, exists, err := item.store.GetByKey(cacheKey(namespace, name))
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, apierrors.NewNotFound(s.gr, name)
	}
	object, ok := obj.(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("unexpected object type: %v", obj)
	}
	if s.immutable(object) {
		item.mu.Lock()
		item.immutable = true
		item.mu.Unlock()
		if item.stop() {
			s.logger.Debug("Stopped watching for changes - object is immutable", zap.String("obj", namespace+"/"+name))
		}
	}
	return object, nil
}

func cacheKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// recycleIdle stops the watches nobody read for maxIdle.
func (s *watchStore) recycleIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	for k, item := range s.items {
		item.mu.Lock()
		idle := item.store.hasSynced() && now.After(item.lastAccess.Add(s.maxIdle))
		item.mu.Unlock()
		if idle && item.stop() {
			s.logger.Debug("Not acquired for long time, Stopped watching for changes", zap.String("objectKey", k.namespace+"/"+k.name),
				zap.Duration("maxIdleTime", s.maxIdle))
		}
	}
}

// run recycles idle watches every minute until ctx ends, then stops every
// watch and waits for the reflectors to return.
func (s *watchStore) run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(context.Context) { s.recycleIdle() }, time.Minute)
	s.mu.Lock()
	s.stopped = true
	for _, item := range s.items {
		item.stop()
	}
	s.mu.Unlock()
	s.runs.Wait()
}
