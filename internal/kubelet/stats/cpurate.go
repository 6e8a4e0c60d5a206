package stats

import (
	"sync"
	"time"
)

const (
	// minRateInterval is the shortest interval a CPU rate is computed over; closer
	// samples (two scrapers at once) reuse the last rate.
	minRateInterval = time.Second
	// bootstrapRateInterval is how long the node's CPU is sampled for when there is no
	// earlier sample, so that the first Summary already has usageNanoCores.
	bootstrapRateInterval = 100 * time.Millisecond
	// rateEntryTTL drops samples of containers that were not reported for so long
	// (upstream's defaultCachePeriod).
	rateEntryTTL = 10 * time.Minute
)

// rateCache turns cumulative CPU usage into usageNanoCores where the runtime left the
// rate out, from the previous sample of the same key (container or sandbox ID, or the
// node). It is upstream's cpuUsageCache, updated by every Summary instead of only by
// the eviction manager.
type rateCache struct {
	mu      sync.Mutex
	entries map[string]*rateEntry
}

type rateEntry struct {
	usage   uint64
	at      int64 // unix nanoseconds of the sample
	rate    uint64
	hasRate bool
}

func newRateCache() *rateCache {
	return &rateCache{entries: map[string]*rateEntry{}}
}

// update records a sample (usage in core-nanoseconds at unix nanoseconds at) and
// returns the rate in nanocores, nil until two samples at least minInterval apart
// exist. first reports that the key had no earlier sample.
func (c *rateCache) update(key string, usage uint64, at int64, minInterval time.Duration) (rate *uint64, first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	switch {
	case e == nil || usage < e.usage:
		// New, or restarted (the counter went back): start over.
		c.entries[key] = &rateEntry{usage: usage, at: at}
		return nil, e == nil
	case at-e.at < int64(minInterval):
		// Too close to the previous sample: keep the last rate.
	default:
		e.rate = uint64(float64(usage-e.usage) / float64(at-e.at) * float64(time.Second))
		e.hasRate = true
		e.usage, e.at = usage, at
	}
	if !e.hasRate {
		return nil, false
	}
	r := e.rate
	return &r, false
}

// prune drops entries whose last sample is older than rateEntryTTL.
func (c *rateCache) prune(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.entries {
		if now.UnixNano()-e.at > int64(rateEntryTTL) {
			delete(c.entries, k)
		}
	}
}
