package kuberuntime

import (
	"context"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// startGate lets at most a bounded number of runtime start steps (a
// sandbox's creation, a container's create and start) run at once, and
// hands a free slot to the pod the kubelet saw first. When a burst of pods
// arrives, Docker's throughput is the limit either way; working on the
// oldest pods first makes them finish first instead of every pod finishing
// at the end. Image pulls and hooks do not hold a slot.
type startGate struct {
	mu      sync.Mutex
	free    int
	waiters []*startWaiter // oldest pod first
}

// startWaiter is one step waiting for a slot.
type startWaiter struct {
	seen    time.Time
	uid     k8stypes.UID
	ready   chan struct{}
	granted bool
}

// newStartGate bounds the steps to n at once; n <= 0: no bound (nil gate).
func newStartGate(n int) *startGate {
	if n <= 0 {
		return nil
	}
	return &startGate{free: n}
}

// acquire waits for a slot for pod's step; the returned release gives it
// back. A nil gate admits at once.
func (g *startGate) acquire(ctx context.Context, pod *v1.Pod) (release func(), err error) {
	if g == nil {
		return func() {}, nil
	}
	g.mu.Lock()
	if g.free > 0 && len(g.waiters) == 0 {
		g.free--
		g.mu.Unlock()
		return g.release, nil
	}
	w := &startWaiter{seen: podSeen(pod), uid: pod.UID, ready: make(chan struct{})}
	i, _ := slices.BinarySearchFunc(g.waiters, w, compareWaiters)
	g.waiters = slices.Insert(g.waiters, i, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return g.release, nil
	case <-ctx.Done():
		g.mu.Lock()
		granted := w.granted
		if !granted {
			g.waiters = slices.DeleteFunc(g.waiters, func(o *startWaiter) bool { return o == w })
		}
		g.mu.Unlock()
		if granted {
			g.release()
		}
		return nil, ctx.Err()
	}
}

// release hands the slot to the oldest waiter, or frees it.
func (g *startGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiters) == 0 {
		g.free++
		return
	}
	w := g.waiters[0]
	g.waiters = g.waiters[1:]
	w.granted = true
	close(w.ready)
}

// compareWaiters orders by the time the kubelet first saw the pod, then UID.
func compareWaiters(a, b *startWaiter) int {
	if c := a.seen.Compare(b.seen); c != 0 {
		return c
	}
	switch {
	case a.uid < b.uid:
		return -1
	case a.uid > b.uid:
		return 1
	}
	return 0
}

// podSeen is when the kubelet first saw the pod (its config.seen
// annotation); zero (first in line) when absent.
func podSeen(pod *v1.Pod) time.Time {
	t, err := time.Parse(time.RFC3339Nano, pod.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey])
	if err != nil {
		return time.Time{}
	}
	return t
}
