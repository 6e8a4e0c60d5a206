package apiobjects

import (
	"context"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
)

// defaultObjectTTL is how long the Cache strategy reuses a read when the
// Node names no time-to-live (upstream's).
const defaultObjectTTL = time.Minute

// getFunc reads one object from the API server.
type getFunc func(ctx context.Context, namespace, name string, opts metav1.GetOptions) (runtime.Object, error)

// ttlStore is upstream's Cache strategy: a referenced object is read again
// once its last read is older than the time-to-live (the Node's
// node.alpha.kubernetes.io/ttl annotation, else a minute); a pod
// (re)registering a reference forgets the last read, so a new or changed
// pod sees the object as it is now. Reads after the first may be served by
// the API server's cache (resourceVersion "0"), and an older answer never
// replaces a newer one.
type ttlStore struct {
	getObject getFunc
	clock     clock.Clock
	ttl       func() (time.Duration, bool) // the Node's; false: none

	mu    sync.Mutex
	items map[objectKey]*ttlItem
}

type ttlItem struct {
	refs int
	data *ttlData
}

type ttlData struct {
	mu     sync.Mutex
	object runtime.Object
	err    error
	read   time.Time
}

func newTTLStore(get getFunc, clk clock.Clock, ttl func() (time.Duration, bool)) *ttlStore {
	return &ttlStore{getObject: get, clock: clk, ttl: ttl, items: map[objectKey]*ttlItem{}}
}

func (s *ttlStore) addReference(namespace, name string) {
	k := objectKey{namespace, name}
	s.mu.Lock()
	defer s.mu.Unlock()
	item, ok := s.items[k]
	if !ok {
		item = &ttlItem{}
		s.items[k] = item
	}
	item.refs++
	item.data = nil
}

func (s *ttlStore) deleteReference(namespace, name string) {
	k := objectKey{namespace, name}
	s.mu.Lock()
	defer s.mu.Unlock()
	if item, ok := s.items[k]; ok {
		if item.refs--; item.refs <= 0 {
			delete(s.items, k)
		}
	}
}

func (s *ttlStore) fresh(d *ttlData) bool {
	ttl := defaultObjectTTL
	if s.ttl != nil {
		if t, ok := s.ttl(); ok {
			ttl = t
		}
	}
	return s.clock.Now().Before(d.read.Add(ttl))
}

func (s *ttlStore) get(ctx context.Context, namespace, name string) (runtime.Object, error) {
	s.mu.Lock()
	item, ok := s.items[objectKey{namespace, name}]
	var d *ttlData
	if ok {
		if item.data == nil {
			item.data = &ttlData{}
		}
		d = item.data
	}
	s.mu.Unlock()
	if !ok {
		return nil, errNotRegistered
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err != nil || !s.fresh(d) {
		opts := metav1.GetOptions{}
		if d.object != nil && d.err == nil {
			opts.ResourceVersion = "0" // the API server's cache will do
		}
		obj, err := s.getObject(ctx, namespace, name, opts)
		if err != nil && !apierrors.IsNotFound(err) && d.object == nil && d.err == nil {
			return obj, err
		}
		if (err == nil && !olderThan(obj, d.object)) || apierrors.IsNotFound(err) {
			d.object, d.err, d.read = obj, err, s.clock.Now()
		}
	}
	return d.object, d.err
}

// olderThan says whether a's resourceVersion is below b's.
func olderThan(a, b runtime.Object) bool {
	if a == nil || b == nil {
		return false
	}
	av, bv := resourceVersion(a), resourceVersion(b)
	return av < bv
}

func resourceVersion(obj runtime.Object) uint64 {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return v
}

// nodeObjectTTL reads the Node's node.alpha.kubernetes.io/ttl annotation
// (seconds), as upstream's GetObjectTTLFromNodeFunc.
func nodeObjectTTL(node func() (annotations map[string]string, ok bool)) func() (time.Duration, bool) {
	return func() (time.Duration, bool) {
		a, ok := node()
		if !ok {
			return 0, false
		}
		if v, ok := a[v1.ObjectTTLAnnotationKey]; ok {
			if n, err := strconv.Atoi(v); err == nil {
				return time.Duration(n) * time.Second, true
			}
		}
		return 0, false
	}
}
