package apistatus

import (
	"sync"

	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// reason is why a container could not be started by the last sync: the
// upstream reason error (ErrImagePull, CrashLoopBackOff, ...) and its message.
type reason struct {
	err     error
	message string
}

// ReasonCache remembers, per pod and container, why the last start failed; the
// status generator turns it into the container's waiting reason (upstream's
// ReasonCache).
type ReasonCache struct {
	mu sync.Mutex
	m  map[k8stypes.UID]map[string]reason
}

func NewReasonCache() *ReasonCache {
	return &ReasonCache{m: map[k8stypes.UID]map[string]reason{}}
}

// update records the StartContainer results of one sync: a failure is remembered,
// a success forgets the container's previous failure.
func (c *ReasonCache) Update(uid k8stypes.UID, result kubecontainer.PodSyncResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range result.SyncResults {
		if r == nil || r.Action != kubecontainer.StartContainer {
			continue
		}
		if r.Error == nil {
			delete(c.m[uid], r.Target)
			continue
		}
		if c.m[uid] == nil {
			c.m[uid] = map[string]reason{}
		}
		c.m[uid][r.Target] = reason{err: r.Error, message: r.Message}
	}
	if len(c.m[uid]) == 0 {
		delete(c.m, uid)
	}
}

func (c *ReasonCache) Get(uid k8stypes.UID, name string) (reason, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, ok := c.m[uid][name]
	return r, ok
}

// retain forgets every pod not in keep.
func (c *ReasonCache) Retain(keep map[k8stypes.UID]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for uid := range c.m {
		if !keep[uid] {
			delete(c.m, uid)
		}
	}
}
