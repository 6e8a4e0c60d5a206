package resources

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Eviction signals (the keys of evictionHard), as upstream.
const (
	SignalMemoryAvailable            = "memory.available"
	SignalNodeFsAvailable            = "nodefs.available"
	SignalNodeFsInodesFree           = "nodefs.inodesFree"
	SignalImageFsAvailable           = "imagefs.available"
	SignalImageFsInodesFree          = "imagefs.inodesFree"
	SignalContainerFsAvailable       = "containerfs.available"
	SignalContainerFsInodesFree      = "containerfs.inodesFree"
	SignalAllocatableMemoryAvailable = "allocatableMemory.available"
	SignalPIDAvailable               = "pid.available"
)

// Threshold is one parsed eviction threshold: the signal is met when what is
// available drops below Quantity, or below Percentage of the capacity.
type Threshold struct {
	Signal     string
	Quantity   *resource.Quantity
	Percentage float32 // as upstream, so that values match to the byte
}

// Value is the threshold in the signal's unit for the given capacity.
func (t Threshold) Value(capacity int64) int64 {
	if t.Quantity != nil {
		return t.Quantity.Value()
	}
	return int64(float64(capacity) * float64(t.Percentage))
}

// ParseThresholds parses an evictionHard map as upstream does: a quantity must
// be positive, a percentage within [0%,100%]; "0%" and "100%" disable the
// signal. The result is sorted by signal.
func ParseThresholds(m map[string]string) ([]Threshold, error) {
	signals := make([]string, 0, len(m))
	for s := range m {
		signals = append(signals, s)
	}
	sort.Strings(signals)
	var out []Threshold
	for _, signal := range signals {
		t, ok, err := ParseThreshold(signal, strings.TrimSpace(m[signal]))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// ParseThreshold parses one threshold value of signal: a positive quantity or a
// percentage in [0%,100%]; ok is false for "0%" and "100%", which disable it.
func ParseThreshold(signal, val string) (Threshold, bool, error) {
	switch signal {
	case SignalMemoryAvailable, SignalNodeFsAvailable, SignalNodeFsInodesFree, SignalImageFsAvailable,
		SignalImageFsInodesFree, SignalContainerFsAvailable, SignalContainerFsInodesFree,
		SignalAllocatableMemoryAvailable, SignalPIDAvailable:
	default:
		return Threshold{}, false, fmt.Errorf("unsupported eviction signal %v", signal)
	}
	if pct, ok := strings.CutSuffix(val, "%"); ok {
		if val == "0%" || val == "100%" {
			return Threshold{}, false, nil
		}
		p, err := strconv.ParseFloat(pct, 32)
		if err != nil {
			return Threshold{}, false, fmt.Errorf("eviction threshold %v: %w", signal, err)
		}
		if p < 0 {
			return Threshold{}, false, fmt.Errorf("eviction percentage threshold %v must be >= 0%%: %s", signal, val)
		}
		if p > 100 {
			return Threshold{}, false, fmt.Errorf("eviction percentage threshold %v must be <= 100%%: %s", signal, val)
		}
		return Threshold{Signal: signal, Percentage: float32(p) / 100}, true, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return Threshold{}, false, fmt.Errorf("eviction threshold %v: %w", signal, err)
	}
	if q.Sign() <= 0 {
		return Threshold{}, false, fmt.Errorf("eviction threshold %v must be positive: %s", signal, q.String())
	}
	return Threshold{Signal: signal, Quantity: &q}, true, nil
}

// hardEvictionReservation is what the memory.available and nodefs.available
// thresholds hold back from allocatable, for the given capacity.
func hardEvictionReservation(thresholds []Threshold, capacity v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for _, t := range thresholds {
		var name v1.ResourceName
		switch t.Signal {
		case SignalMemoryAvailable:
			name = v1.ResourceMemory
		case SignalNodeFsAvailable:
			name = v1.ResourceEphemeralStorage
		default:
			continue
		}
		c := capacity[name]
		if t.Quantity != nil {
			out[name] = t.Quantity.DeepCopy()
		} else {
			out[name] = *resource.NewQuantity(t.Value(c.Value()), resource.BinarySI)
		}
	}
	return out
}
