package eviction

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// thresholdsMet returns the thresholds whose signal has less available than
// the threshold (plus its minimum reclaim with enforceMinReclaim). Signals
// without an observation are never met.
func thresholdsMet(thresholds []Threshold, obs observations, enforceMinReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range thresholds {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		want := t.Value(o.capacity)
		if enforceMinReclaim && t.MinReclaim != nil {
			want += t.MinReclaim.Value(o.capacity)
		}
		if want > o.available {
			out = append(out, t)
		}
	}
	return out
}

// mergeThresholds is a followed by the thresholds of b not in a.
func mergeThresholds(a, b []Threshold) []Threshold {
	out := append([]Threshold{}, a...)
	for _, t := range b {
		if !hasThreshold(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func hasThreshold(list []Threshold, t Threshold) bool {
	for _, x := range list {
		if x.key() == t.key() {
			return true
		}
	}
	return false
}

// firstObservedAt keeps when each met threshold was first seen (now for new
// ones); thresholds no longer met are forgotten.
func firstObservedAt(met []Threshold, last map[string]time.Time, now time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(met))
	for _, t := range met {
		at, ok := last[t.key()]
		if !ok {
			at = now
		}
		out[t.key()] = at
	}
	return out
}

// metGracePeriod keeps the thresholds met for at least their grace period.
func metGracePeriod(met []Threshold, observedAt map[string]time.Time, now time.Time) []Threshold {
	var out []Threshold
	for _, t := range met {
		if at, ok := observedAt[t.key()]; ok && now.Sub(at) >= t.GracePeriod {
			out = append(out, t)
		}
	}
	return out
}

// updatedStats keeps the thresholds whose signal was sampled after the
// previous pass's sample, so that a stale sample never evicts twice.
func updatedStats(met []Threshold, obs, last observations) []Threshold {
	var out []Threshold
	for _, t := range met {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		prev, seen := last[t.Signal]
		if !seen || o.time.IsZero() || o.time.After(prev.time) {
			out = append(out, t)
		}
	}
	return out
}

// conditionsOf returns the node conditions the thresholds drive.
func conditionsOf(met []Threshold) map[v1.NodeConditionType]bool {
	out := map[v1.NodeConditionType]bool{}
	for _, t := range met {
		out[signalCondition(t.Signal)] = true
	}
	return out
}

// conditionsObservedSince keeps the conditions last seen less than period
// ago: a condition goes on at once and off period after its pressure ended.
func conditionsObservedSince(lastSeen map[v1.NodeConditionType]time.Time, period time.Duration, now time.Time) map[v1.NodeConditionType]bool {
	out := map[v1.NodeConditionType]bool{}
	for c, at := range lastSeen {
		if now.Sub(at) < period {
			out[c] = true
		}
	}
	return out
}

// byEvictionPriority orders thresholds so that memory signals come first, as
// upstream does (memory pressure is reclaimed before anything else).
func byEvictionPriority(a, b Threshold) int {
	am, bm := signalResource[a.Signal] == v1.ResourceMemory, signalResource[b.Signal] == v1.ResourceMemory
	switch {
	case am && !bm:
		return -1
	case bm && !am:
		return 1
	}
	return 0
}
