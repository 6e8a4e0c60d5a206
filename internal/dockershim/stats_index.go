package dockershim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// The stats index is the list of Kubernetes containers (sandboxes and containers,
// with their names, labels and whether they run) that the list stats RPCs report on.
// It comes from one Docker list and is reused while nothing can have changed it:
//
//   - the shim follows Docker's container events (eventBroker); every create, start,
//     die or destroy event, and every break of the event stream, makes the next
//     request list again (gen), so a container started, stopped or removed outside
//     the shim shows up at the next request;
//   - without a followed event stream (before Start, or while it re-subscribes) every
//     request lists;
//   - and whatever happens, a list older than statsListTTL is not reused.
//
// A request also drops a listed container whose cgroup is gone (it stopped) and makes
// the next one list again. The remaining window is an event Docker has not delivered
// yet when a request starts; the container's cgroup is then normally gone already.

// statsListTTL is the longest a Docker list is reused.
const statsListTTL = 5 * time.Second

// statsIndex caches the list of managed containers between stats requests.
type statsIndex struct {
	mu        sync.Mutex
	targets   []statsTarget // read-only once stored
	listedAt  time.Time
	listedGen uint64
	valid     bool
	gen       uint64 // bumped by every event, stream change and invalidation
	live      bool   // Docker's event stream is followed
	listing   chan struct{}
	listSeq   uint64 // lists stored so far
}

// invalidate makes the next request list again.
func (x *statsIndex) invalidate() {
	x.mu.Lock()
	x.gen++
	x.mu.Unlock()
}

// setLive records whether events are followed; either change invalidates.
func (x *statsIndex) setLive(up bool) {
	x.mu.Lock()
	x.live = up
	x.gen++
	x.mu.Unlock()
}

// fresh reports whether the stored list may be reused at now.
func (x *statsIndex) freshLocked(now time.Time) bool {
	return x.valid && x.live && x.gen == x.listedGen && now.Sub(x.listedAt) < statsListTTL && !now.Before(x.listedAt)
}

// get returns the managed containers, listing them when the stored list may be
// stale. Concurrent requests share one list. The slice must not be changed.
func (x *statsIndex) get(ctx context.Context, now func() time.Time,
	list func(context.Context) ([]statsTarget, error)) ([]statsTarget, error) {
	for {
		x.mu.Lock()
		if x.freshLocked(now()) {
			t := x.targets
			x.mu.Unlock()
			return t, nil
		}
		if ch := x.listing; ch != nil {
			seq := x.listSeq
			x.mu.Unlock()
			select {
			case <-ch:
				// The list that ran may predate an event; check again.
				if t, ok := x.sharedResult(seq); ok {
					return t, nil
				}
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		x.listing = ch
		gen, at := x.gen, now()
		x.mu.Unlock()

		t, err := list(ctx)

		x.mu.Lock()
		x.listing = nil
		close(ch)
		if err != nil {
			x.mu.Unlock()
			return nil, err
		}
		x.targets, x.listedAt, x.listedGen, x.valid = t, at, gen, true
		x.listSeq++
		x.mu.Unlock()
		return t, nil
	}
}

// sharedResult returns the list that the request this one waited for stored (seq was
// the count before it), when no event came since it started, even without a followed
// event stream: the two requests overlapped.
func (x *statsIndex) sharedResult(seq uint64) ([]statsTarget, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.listSeq == seq+1 && x.gen == x.listedGen {
		return x.targets, true
	}
	return nil, false
}

// listStatsTargets is one Docker list of every Kubernetes sandbox and container (any
// value of the type label), as stats targets.
func (s *Service) listStatsTargets(ctx context.Context) ([]statsTarget, error) {
	list, err := s.docker.ListContainers(ctx, libdocker.ListOptions{All: true,
		Filters: libdocker.NewFilterArgs(libdocker.FilterArg("label", labelType))})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := make([]statsTarget, 0, len(list))
	for i := range list {
		t := targetOfSummary(&list[i])
		if t.typ == typeSandbox || t.typ == typeContainer {
			out = append(out, t)
		}
	}
	return out, nil
}

// statsTargets returns the managed containers from the index, making sure the
// collector follows Docker's events first.
func (s *Service) statsTargets(ctx context.Context) ([]statsTarget, error) {
	s.stats.watchOnce.Do(func() { s.events.addObserver(s.stats) })
	return s.stats.index.get(ctx, s.stats.now, s.listStatsTargets)
}

// observeStream is the event stream going up or down.
func (c *statsCollector) observeStream(up bool) {
	c.index.setLive(up)
	if !up {
		c.logger.Debug("docker events not followed; stats list containers at each request")
	}
}

// observeEvent invalidates the index and, for a container that started, died or was
// removed, forgets its PID and closes its cgroup files (removed: forgets it all).
func (c *statsCollector) observeEvent(m libdocker.EventMessage) {
	c.index.invalidate()
	switch string(m.Action) {
	case "start", "die":
		c.forget(m.Actor.ID, false)
	case "destroy":
		c.forget(m.Actor.ID, true)
	}
}

// forget drops what is known about a container's process (and with remove, the whole
// entry), so that the next request inspects it again.
func (c *statsCollector) forget(id string, remove bool) {
	c.mu.Lock()
	e := c.entries[id]
	if e == nil {
		c.mu.Unlock()
		return
	}
	cg, held := e.cg, e.cgPid != 0
	e.epoch++
	e.pid, e.cgPid, e.inspectedAt = 0, 0, time.Time{}
	e.cpu, e.podCPU = cpuTracker{}, cpuTracker{}
	if remove && e.refreshing == nil {
		delete(c.entries, id)
	}
	c.mu.Unlock()
	if held {
		c.cgroups.release(cg)
	}
	c.logger.Debug("stats: container changed", zap.String("id", id), zap.Bool("removed", remove))
}
