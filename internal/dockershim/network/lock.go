package network

import (
	"context"
	"fmt"
	"sync"
)

// keyedLock serializes work per key (a sandbox ID) while different keys run
// in parallel. Entries are removed as soon as nobody holds or waits for them.
type keyedLock struct {
	mu      sync.Mutex
	entries map[string]*lockEntry
}

type lockEntry struct {
	// sem has capacity one: holding the lock means having sent into it.
	sem  chan struct{}
	refs int // holders plus waiters
}

func newKeyedLock() *keyedLock {
	return &keyedLock{entries: make(map[string]*lockEntry)}
}

// lock blocks until key is free or ctx is done. On success the caller must
// call the returned unlock function exactly once.
func (l *keyedLock) lock(ctx context.Context, key string) (unlock func(), err error) {
	l.mu.Lock()
	e, ok := l.entries[key]
	if !ok {
		e = &lockEntry{sem: make(chan struct{}, 1)}
		l.entries[key] = e
	}
	e.refs++
	l.mu.Unlock()

	select {
	case e.sem <- struct{}{}:
		var once sync.Once
		return func() {
			once.Do(func() {
				<-e.sem
				l.release(key, e)
			})
		}, nil
	case <-ctx.Done():
		l.release(key, e)
		return nil, fmt.Errorf("waiting for the network lock of sandbox %s: %w", key, ctx.Err())
	}
}

func (l *keyedLock) release(key string, e *lockEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.refs--
	if e.refs == 0 {
		delete(l.entries, key)
	}
}

// size returns the number of keys held or waited for.
func (l *keyedLock) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.entries)
}
