package apiobjects

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// ttlCache remembers the result of a read for ttl: the object, or its absence
// (a NotFound error). Other errors are not remembered, so the next call reads
// again. Expired entries are dropped at most once per ttl.
type ttlCache[T any] struct {
	ttl   time.Duration
	clock clock.PassiveClock

	mu        sync.Mutex
	entries   map[string]cacheEntry[T]
	lastSweep time.Time
}

type cacheEntry[T any] struct {
	obj T
	err error // nil or NotFound
	// read is when the read started: the entry is fresh until read+ttl.
	read time.Time
}

func newTTLCache[T any](ttl time.Duration, clk clock.PassiveClock) *ttlCache[T] {
	return &ttlCache[T]{ttl: ttl, clock: clk, entries: map[string]cacheEntry[T]{}, lastSweep: clk.Now()}
}

// get returns the fresh entry of key, else calls fetch and remembers its
// result (an object or NotFound). Concurrent misses of one key may each fetch.
func (c *ttlCache[T]) get(ctx context.Context, key string, fetch func(context.Context) (T, error)) (T, error) {
	now := c.clock.Now()
	if e, ok := c.lookup(key, now); ok {
		return e.obj, e.err
	}
	obj, err := fetch(ctx)
	if err != nil && !apierrors.IsNotFound(err) {
		var zero T
		return zero, err
	}
	c.mu.Lock()
	// A newer read may have finished while this one was in flight: keep it.
	if old, ok := c.entries[key]; !ok || !old.read.After(now) {
		c.entries[key] = cacheEntry[T]{obj: obj, err: err, read: now}
	}
	c.mu.Unlock()
	return obj, err
}

// lookup returns key's entry if it is still fresh at now, and drops expired
// entries once per ttl.
func (c *ttlCache[T]) lookup(key string, now time.Time) (cacheEntry[T], bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.lastSweep) >= c.ttl {
		for k, e := range c.entries {
			if !c.fresh(e, now) {
				delete(c.entries, k)
			}
		}
		c.lastSweep = now
	}
	e, ok := c.entries[key]
	if !ok || !c.fresh(e, now) {
		return cacheEntry[T]{}, false
	}
	return e, true
}

func (c *ttlCache[T]) fresh(e cacheEntry[T], now time.Time) bool {
	return now.Sub(e.read) < c.ttl
}

// len returns the number of entries (fresh or not yet swept).
func (c *ttlCache[T]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
