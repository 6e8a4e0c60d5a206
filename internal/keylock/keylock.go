// Package keylock serialises operations per key (a pod UID, a volume handle)
// without one key's slow holder blocking any other key: upstream's
// nestedpendingoperations in its simplest form. It is a leaf: it imports
// nothing of this module.
package keylock

import (
	"context"
	"sync"
)

// Locks is a set of mutexes by key; the zero value is ready. An entry exists
// only while its key is held or waited for.
type Locks struct {
	mu   sync.Mutex
	held map[string]*entry
}

type entry struct {
	sem  chan struct{} // holds one token while the key is locked
	refs int           // holders and waiters
}

// Lock locks key, waiting until it is free or ctx ends (then ctx's error).
// The returned func unlocks it; call it exactly once.
func (l *Locks) Lock(ctx context.Context, key string) (unlock func(), err error) {
	e := l.ref(key)
	select {
	case e.sem <- struct{}{}:
		return func() { l.release(key, e) }, nil
	case <-ctx.Done():
		l.unref(key, e)
		return nil, ctx.Err()
	}
}

// TryLock locks key if it is free; ok is false (and nothing held) when
// another holder has it.
func (l *Locks) TryLock(key string) (unlock func(), ok bool) {
	e := l.ref(key)
	select {
	case e.sem <- struct{}{}:
		return func() { l.release(key, e) }, true
	default:
		l.unref(key, e)
		return nil, false
	}
}

// Held reports how many keys are held or waited for (tests, metrics).
func (l *Locks) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.held)
}

func (l *Locks) ref(key string) *entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[string]*entry{}
	}
	e, ok := l.held[key]
	if !ok {
		e = &entry{sem: make(chan struct{}, 1)}
		l.held[key] = e
	}
	e.refs++
	return e
}

func (l *Locks) release(key string, e *entry) {
	<-e.sem
	l.unref(key, e)
}

func (l *Locks) unref(key string, e *entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.refs--; e.refs == 0 {
		delete(l.held, key)
	}
}
