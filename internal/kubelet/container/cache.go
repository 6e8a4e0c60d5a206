package container

import (
	"context"
	"fmt"
	"sync"
	"time"

	k8stypes "k8s.io/apimachinery/pkg/types"
)

// Cache holds the newest runtime status of every pod the PLEG has seen,
// together with the time each status was read. It is safe for concurrent use.
//
// Besides the per-pod times, the cache has a global timestamp (UpdateTime): the
// PLEG moves it after every relist to say "every pod not updated individually
// was unchanged at this time". GetNewerThan uses both to decide whether a
// cached status is fresh enough for a pod worker.
//
// The global time does not vouch for a pod the kubelet itself changed
// (MarkChanged) until a status read after the change is cached: an evented
// PLEG moves the global time while the change's own event may still be on its
// way, and a worker acting on the older status would repeat the change (start
// a container twice).
type Cache struct {
	mu          sync.Mutex
	pods        map[k8stypes.UID]*cacheEntry
	timestamp   time.Time // global: zero until the first UpdateTime
	subscribers map[k8stypes.UID][]*subscriber
	changed     map[k8stypes.UID]time.Time // MarkChanged times not yet read past
}

// cacheEntry is one pod's status as of modified.
type cacheEntry struct {
	status   *PodStatus
	err      error
	modified time.Time
}

// subscriber waits for a status of one pod newer than minTime.
type subscriber struct {
	minTime time.Time
	ch      chan *cacheEntry // buffered (1); receives exactly one entry
}

// NewCache returns an empty cache.
func NewCache() *Cache {
	return &Cache{
		pods:        map[k8stypes.UID]*cacheEntry{},
		subscribers: map[k8stypes.UID][]*subscriber{},
		changed:     map[k8stypes.UID]time.Time{},
	}
}

// Get returns the cached status of the pod and the error its last read had. A
// pod that is not cached has an empty status (only ID set) and no error.
func (c *Cache) Get(uid k8stypes.UID) (*PodStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.get(uid)
	return e.status, e.err
}

// GetNewerThan blocks until the cache holds a status of the pod that is newer
// than minTime, either because the pod's own entry was written after minTime or
// because the global timestamp moved past it, and returns it (with the error of
// that read). It returns ctx's error when ctx ends first.
func (c *Cache) GetNewerThan(ctx context.Context, uid k8stypes.UID, minTime time.Time) (*PodStatus, error) {
	sub := c.subscribe(uid, minTime)
	select {
	case e := <-sub.ch:
		return e.status, e.err
	case <-ctx.Done():
		c.unsubscribe(uid, sub)
		// The entry may have been delivered while unsubscribing; it is dropped.
		return nil, fmt.Errorf("wait for status of pod %q newer than %s: %w", uid, minTime.Format(time.RFC3339Nano), ctx.Err())
	}
}

// Set stores the status of a pod read at ts (err is the error of that read, if
// any) and wakes the waiters it satisfies. A write older than the entry already
// cached is ignored, so a slow reader cannot replace a newer status.
func (c *Cache) Set(uid k8stypes.UID, status *PodStatus, err error, ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[uid]; ok && ts.Before(old.modified) {
		return
	}
	if status == nil {
		status = &PodStatus{ID: uid}
	}
	c.pods[uid] = &cacheEntry{status: status, err: err, modified: ts}
	if at, ok := c.changed[uid]; ok && !ts.Before(at) {
		delete(c.changed, uid)
	}
	c.notify(uid)
}

// MarkChanged records that the kubelet changed the pod in the runtime at ts:
// until a status read at or after ts is Set, only the pod's own entry can
// answer its waiters, never the global time. The caller has such a read
// done (the evented PLEG reads the pod at once).
func (c *Cache) MarkChanged(uid k8stypes.UID, ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := c.changed[uid]; !ok || ts.After(at) {
		c.changed[uid] = ts
	}
}

// Unread reports whether the pod is still marked changed at or after at: no
// status read made after that change has been cached yet.
func (c *Cache) Unread(uid k8stypes.UID, at time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	marked, ok := c.changed[uid]
	return ok && !marked.Before(at)
}

// Delete forgets a pod (it has nothing left in the runtime).
func (c *Cache) Delete(uid k8stypes.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pods, uid)
}

// UpdateTime moves the global timestamp to ts (never backwards) and wakes every
// waiter whose minimum time it reaches.
func (c *Cache) UpdateTime(ts time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ts.Before(c.timestamp) {
		return
	}
	c.timestamp = ts
	for uid := range c.subscribers {
		c.notify(uid)
	}
}

// get returns the entry of uid or the default (empty status) entry. Caller holds mu.
func (c *Cache) get(uid k8stypes.UID) *cacheEntry {
	if e, ok := c.pods[uid]; ok {
		return e
	}
	return &cacheEntry{status: &PodStatus{ID: uid}}
}

// newerThan returns the entry of uid if it is fresh with respect to minTime,
// else nil. Caller holds mu.
func (c *Cache) newerThan(uid k8stypes.UID, minTime time.Time) *cacheEntry {
	_, changed := c.changed[uid]
	globalNewer := !changed && !c.timestamp.IsZero() && c.timestamp.After(minTime)
	e, ok := c.pods[uid]
	switch {
	case !ok && globalNewer:
		return c.get(uid)
	case ok && (e.modified.After(minTime) || globalNewer):
		return e
	}
	return nil
}

// notify hands the current entry to every waiter of uid it is fresh enough
// for. Caller holds mu.
func (c *Cache) notify(uid k8stypes.UID) {
	subs := c.subscribers[uid]
	if len(subs) == 0 {
		return
	}
	var keep []*subscriber
	for _, s := range subs {
		e := c.newerThan(uid, s.minTime)
		if e == nil {
			keep = append(keep, s)
			continue
		}
		s.ch <- e
	}
	if len(keep) == 0 {
		delete(c.subscribers, uid)
		return
	}
	c.subscribers[uid] = keep
}

// subscribe registers a waiter, answering at once when the cache is already fresh.
func (c *Cache) subscribe(uid k8stypes.UID, minTime time.Time) *subscriber {
	s := &subscriber{minTime: minTime, ch: make(chan *cacheEntry, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.newerThan(uid, minTime); e != nil {
		s.ch <- e
		return s
	}
	c.subscribers[uid] = append(c.subscribers[uid], s)
	return s
}

// unsubscribe removes a waiter that gave up.
func (c *Cache) unsubscribe(uid k8stypes.UID, s *subscriber) {
	c.mu.Lock()
	defer c.mu.Unlock()
	subs := c.subscribers[uid]
	for i, x := range subs {
		if x == s {
			subs = append(subs[:i:i], subs[i+1:]...)
			break
		}
	}
	if len(subs) == 0 {
		delete(c.subscribers, uid)
		return
	}
	c.subscribers[uid] = subs
}
