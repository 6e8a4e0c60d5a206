package credentialprovider

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

const (
	// globalCacheKey keys answers of cacheKeyType Global; the brackets keep
	// it apart from image and registry names.
	globalCacheKey = "<global>"
	// cachePurgeInterval is how often expired entries that are never looked
	// up again are dropped.
	cachePurgeInterval = 15 * time.Minute
)

// credentialCache keeps a plugin's answers until they expire, keyed by image,
// registry or globalCacheKey according to the answer's cacheKeyType.
type credentialCache struct {
	clock clock.PassiveClock

	mu        sync.Mutex
	entries   map[string]cacheEntry
	lastPurge time.Time
}

type cacheEntry struct {
	cfg     dockerConfig
	expires time.Time
}

func newCredentialCache(clk clock.PassiveClock) *credentialCache {
	return &credentialCache{clock: clk, entries: map[string]cacheEntry{}, lastPurge: clk.Now()}
}

// get returns the entry of the first key that holds an unexpired one.
func (c *credentialCache) get(keys ...string) (dockerConfig, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if now.After(c.lastPurge.Add(cachePurgeInterval)) {
		for k, e := range c.entries {
			if now.After(e.expires) {
				delete(c.entries, k)
			}
		}
		c.lastPurge = now
	}
	for _, k := range keys {
		e, ok := c.entries[k]
		if !ok {
			continue
		}
		if now.After(e.expires) {
			delete(c.entries, k)
			continue
		}
		return e.cfg, true
	}
	return nil, false
}

// put stores cfg under key until expires.
func (c *credentialCache) put(key string, cfg dockerConfig, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[key] = cacheEntry{cfg: cfg, expires: expires}
}
