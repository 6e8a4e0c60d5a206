package prober

import (
	"context"
	"sync"

	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// Result is the cached outcome of a probe for one container.
type Result int

const (
	// Unknown means no decision yet (the initial startup result).
	Unknown Result = iota
	// Success means the probe passed (successThreshold times in a row).
	Success
	// Failure means the probe failed (failureThreshold times in a row).
	Failure
)

func (r Result) String() string {
	switch r {
	case Success:
		return "Success"
	case Failure:
		return "Failure"
	}
	return "Unknown"
}

// ProbeType names one of the three kinds of probes.
type ProbeType int

const (
	// Liveness probes restart the container on failure.
	Liveness ProbeType = iota
	// Readiness probes set ContainerStatus.Ready.
	Readiness
	// Startup probes set ContainerStatus.Started and gate the other two.
	Startup
)

// String returns the name used in events ("Liveness probe failed: ...").
func (t ProbeType) String() string {
	switch t {
	case Liveness:
		return "Liveness"
	case Readiness:
		return "Readiness"
	case Startup:
		return "Startup"
	}
	return "Unknown"
}

// Update is one change of a container's probe result.
type Update struct {
	ContainerID kubecontainer.ContainerID
	Result      Result
	PodUID      k8stypes.UID
}

// updatesBuffer is the capacity of each update channel (upstream uses 20).
const updatesBuffer = 20

// resultsCache holds the latest result of one probe type per container and publishes
// every change on its channel.
type resultsCache struct {
	mu      sync.RWMutex
	cache   map[kubecontainer.ContainerID]Result
	updates chan Update
}

func newResultsCache() *resultsCache {
	return &resultsCache{
		cache:   make(map[kubecontainer.ContainerID]Result),
		updates: make(chan Update, updatesBuffer),
	}
}

// get returns the cached result of a container.
func (c *resultsCache) get(id kubecontainer.ContainerID) (Result, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	r, ok := c.cache[id]
	return r, ok
}

// set stores a result and, when it differs from the cached one, sends an Update. The
// send blocks while the channel is full until ctx ends. It reports whether the result
// changed.
func (c *resultsCache) set(ctx context.Context, id kubecontainer.ContainerID, r Result, podUID k8stypes.UID) bool {
	if !c.store(id, r) {
		return false
	}
	select {
	case c.updates <- Update{ContainerID: id, Result: r, PodUID: podUID}:
	case <-ctx.Done():
	}
	return true
}

func (c *resultsCache) store(id kubecontainer.ContainerID, r Result) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.cache[id]; ok && prev == r {
		return false
	}
	c.cache[id] = r
	return true
}

// remove forgets a container's result.
func (c *resultsCache) remove(id kubecontainer.ContainerID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.cache, id)
}

// Results holds the latest liveness, readiness and startup result of every
// probed container and publishes each change. The prober's workers write it;
// the runtime manager reads the failures (kuberuntime.ProbeResults) and the
// kubelet the updates. It is safe for concurrent use.
type Results struct {
	liveness, readiness, startup *resultsCache
}

// NewResults returns empty results.
func NewResults() *Results {
	return &Results{liveness: newResultsCache(), readiness: newResultsCache(), startup: newResultsCache()}
}

// LivenessUpdates delivers every change of a liveness result; the kubelet restarts the
// container on Failure.
func (r *Results) LivenessUpdates() <-chan Update { return r.liveness.updates }

// ReadinessUpdates delivers every change of a readiness result.
func (r *Results) ReadinessUpdates() <-chan Update { return r.readiness.updates }

// StartupUpdates delivers every change of a startup result.
func (r *Results) StartupUpdates() <-chan Update { return r.startup.updates }

// Result returns the cached result of a probe type for a container.
func (r *Results) Result(t ProbeType, id kubecontainer.ContainerID) (Result, bool) {
	return r.cacheFor(t).get(id)
}

func (r *Results) cacheFor(t ProbeType) *resultsCache {
	switch t {
	case Liveness:
		return r.liveness
	case Readiness:
		return r.readiness
	}
	return r.startup
}
