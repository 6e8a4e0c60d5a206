package eviction

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// enforcePods is the enforceNodeAllocatable key that makes the kubelet derive
// allocatableMemory.available thresholds from memory.available.
const enforcePods = "pods"

// Threshold is one eviction threshold: the signal is met when what is
// available drops below the value. A zero GracePeriod makes it hard.
type Threshold struct {
	resources.Threshold
	// GracePeriod is how long a soft threshold must be met before pods are
	// evicted; 0 for hard thresholds.
	GracePeriod time.Duration
	// MinReclaim is what is reclaimed beyond the threshold once it is met
	// (evictionMinimumReclaim); nil = none.
	MinReclaim *resources.Threshold
}

// hard reports whether t evicts without a grace period.
func (t Threshold) hard() bool { return t.GracePeriod == 0 }

// key identifies a threshold across samples (a signal has at most one hard
// and one soft threshold).
func (t Threshold) key() string {
	if t.hard() {
		return t.Signal + "/hard"
	}
	return t.Signal + "/soft"
}

// ThresholdConfig is the eviction part of the KubeletConfiguration.
type ThresholdConfig struct {
	Hard, Soft, SoftGracePeriod, MinimumReclaim map[string]string
	// EnforceNodeAllocatable: with "pods", each hard memory.available threshold
	// is copied to allocatableMemory.available.
	EnforceNodeAllocatable []string
}

// ParseThresholdConfig parses the thresholds as upstream's
// ParseThresholdConfig does, with its error messages: hard, then soft (each
// needs a grace period), the minimum reclaims attached to every threshold of
// their signal, and the allocatable copies of the hard memory thresholds.
func ParseThresholdConfig(c ThresholdConfig) ([]Threshold, error) {
	hard, err := parseStatements(c.Hard)
	if err != nil {
		return nil, err
	}
	soft, err := parseStatements(c.Soft)
	if err != nil {
		return nil, err
	}
	grace, err := parseGracePeriods(c.SoftGracePeriod)
	if err != nil {
		return nil, err
	}
	reclaims, err := parseMinimumReclaims(c.MinimumReclaim)
	if err != nil {
		return nil, err
	}
	for i := range soft {
		period, ok := grace[soft[i].Signal]
		if !ok {
			return nil, fmt.Errorf("grace period must be specified for the soft eviction threshold %v", soft[i].Signal)
		}
		soft[i].GracePeriod = period
	}
	out := append(hard, soft...)
	for i := range out {
		if r, ok := reclaims[out[i].Signal]; ok {
			out[i].MinReclaim = &r
		}
	}
	for _, key := range c.EnforceNodeAllocatable {
		if key == enforcePods {
			return addAllocatableThresholds(out), nil
		}
	}
	return out, nil
}

// addAllocatableThresholds copies every hard memory.available threshold to
// allocatableMemory.available.
func addAllocatableThresholds(in []Threshold) []Threshold {
	out := append([]Threshold{}, in...)
	for _, t := range in {
		if t.Signal == resources.SignalMemoryAvailable && t.hard() {
			c := t
			c.Signal = resources.SignalAllocatableMemoryAvailable
			out = append(out, c)
		}
	}
	return out
}

// sortedKeys returns m's keys in order, so that parsing and its errors are
// deterministic.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func parseStatements(m map[string]string) ([]Threshold, error) {
	var out []Threshold
	for _, signal := range sortedKeys(m) {
		t, ok, err := resources.ParseThreshold(signal, strings.TrimSpace(m[signal]))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, Threshold{Threshold: t})
		}
	}
	return out, nil
}

func parseGracePeriods(m map[string]string) (map[string]time.Duration, error) {
	out := map[string]time.Duration{}
	for _, signal := range sortedKeys(m) {
		if err := validSignal(signal); err != nil {
			return nil, err
		}
		d, err := time.ParseDuration(strings.TrimSpace(m[signal]))
		if err != nil {
			return nil, err
		}
		if d < 0 {
			return nil, fmt.Errorf("invalid eviction grace period specified: %v, must be a positive value", m[signal])
		}
		out[signal] = d
	}
	return out, nil
}

func parseMinimumReclaims(m map[string]string) (map[string]resources.Threshold, error) {
	out := map[string]resources.Threshold{}
	for _, signal := range sortedKeys(m) {
		if err := validSignal(signal); err != nil {
			return nil, err
		}
		val := strings.TrimSpace(m[signal])
		if pct, isPct := strings.CutSuffix(val, "%"); isPct {
			p, err := strconv.ParseFloat(pct, 32)
			if err != nil {
				return nil, err
			}
			if p <= 0 {
				return nil, fmt.Errorf("eviction percentage minimum reclaim %v must be positive: %s", signal, val)
			}
			out[signal] = resources.Threshold{Signal: signal, Percentage: float32(p) / 100}
			continue
		}
		q, err := resource.ParseQuantity(val)
		if err != nil {
			return nil, err
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("negative eviction minimum reclaim specified for %v", signal)
		}
		out[signal] = resources.Threshold{Signal: signal, Quantity: &q}
	}
	return out, nil
}

// validSignal fails for names that are not eviction signals.
func validSignal(signal string) error {
	if _, ok := signalResource[signal]; !ok {
		return fmt.Errorf("unsupported eviction signal %v", signal)
	}
	return nil
}
