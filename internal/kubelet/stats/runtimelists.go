package stats

import (
	"context"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A Summary needs, next to ListPodSandboxStats, the sandboxes' and containers'
// creation times and states, which only ListPodSandbox and ListContainers give; on
// the dockershim each is a Docker list that costs more than the stats themselves.
// Their answers are kept (listCache) and reused while they cover the stats:
//
//   - every sandbox and container the stats name was listed (READY and RUNNING), so
//     a new pod or container is listed at once;
//   - the runtime is seen to report only ready sandboxes and running containers in
//     ListPodSandboxStats (checked at every list): then a sandbox or container that
//     stopped leaves the stats at once, and the cached states are not needed for it.
//     A runtime that also reports stopped ones is listed at every Summary, as before;
//   - and the lists are younger than runtimeListTTL.

// runtimeListTTL is the longest ListPodSandbox and ListContainers answers are reused.
const runtimeListTTL = 30 * time.Second

// listCache is the last ListPodSandbox and ListContainers answers.
type listCache struct {
	mu      sync.Mutex
	view    *runtimeView // sandboxes and containers only; never changed once stored
	listed  map[string]bool
	at      time.Time
	trusted bool // the stats listed with them named only listed, ready/running objects
}

// lookup returns the cached view for podStats when it covers them at now.
func (c *listCache) lookup(podStats []*runtimeapi.PodSandboxStats, now time.Time) (*runtimeView, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view == nil || !c.trusted || now.Sub(c.at) >= runtimeListTTL || now.Before(c.at) {
		return nil, false
	}
	if !covers(c.view, c.listed, podStats) {
		return nil, false
	}
	return &runtimeView{sandboxes: c.view.sandboxes, containers: c.view.containers, podStats: podStats}, true
}

// store keeps lists made at "at" (when they were asked for) with the stats asked
// next to them.
func (c *listCache) store(v *runtimeView, sbs []*runtimeapi.PodSandbox, podStats []*runtimeapi.PodSandboxStats, at time.Time) {
	listed := make(map[string]bool, len(sbs))
	ready := make(map[string]bool, len(sbs))
	for _, sb := range sbs {
		listed[sb.GetId()] = true
		ready[sb.GetId()] = sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY
	}
	trusted := true
	for _, sst := range podStats {
		if !ready[sst.GetAttributes().GetId()] {
			trusted = false
		}
	}
	trusted = trusted && covers(v, listed, podStats)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.view, c.listed, c.at, c.trusted = &runtimeView{sandboxes: v.sandboxes, containers: v.containers}, listed, at, trusted
}

// forget drops the lists (the runtime answered without pod stats).
func (c *listCache) forget() {
	c.mu.Lock()
	c.view = nil
	c.mu.Unlock()
}

// covers reports whether every sandbox the stats name was listed and every container
// they name was listed as running.
func covers(v *runtimeView, listed map[string]bool, podStats []*runtimeapi.PodSandboxStats) bool {
	for _, sst := range podStats {
		if !listed[sst.GetAttributes().GetId()] {
			return false
		}
		for _, cst := range sst.GetLinux().GetContainers() {
			if _, ok := v.containers[cst.GetAttributes().GetId()]; !ok {
				return false
			}
		}
	}
	return true
}

// podStatsCached asks ListPodSandboxStats alone when trusted lists are kept, and
// returns the view when they cover its answer. asked reports whether the stats were
// asked (their answer, or error, is then returned for the caller to use).
func (p *Provider) podStatsCached(ctx context.Context) (v *runtimeView, podStats []*runtimeapi.PodSandboxStats, asked bool, err error) {
	at := p.now()
	if p.noPodStats.Load() || !p.lists.usable(at) {
		return nil, nil, false, nil
	}
	podStats, err = p.runtime.ListPodSandboxStats(ctx, &runtimeapi.PodSandboxStatsFilter{})
	if err != nil {
		return nil, nil, true, err
	}
	if podStats == nil {
		podStats = []*runtimeapi.PodSandboxStats{}
	}
	v, _ = p.lists.lookup(podStats, at)
	return v, podStats, true, nil
}

// usable reports whether trusted lists younger than the TTL are kept.
func (c *listCache) usable(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.view != nil && c.trusted && now.Sub(c.at) < runtimeListTTL && !now.Before(c.at)
}
