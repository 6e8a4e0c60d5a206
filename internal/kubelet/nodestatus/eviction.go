package nodestatus

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Eviction signals (the keys of Options.EvictionHard), as upstream.
const (
	signalMemoryAvailable            = "memory.available"
	signalNodeFsAvailable            = "nodefs.available"
	signalNodeFsInodesFree           = "nodefs.inodesFree"
	signalImageFsAvailable           = "imagefs.available"
	signalImageFsInodesFree          = "imagefs.inodesFree"
	signalContainerFsAvailable       = "containerfs.available"
	signalContainerFsInodesFree      = "containerfs.inodesFree"
	signalAllocatableMemoryAvailable = "allocatableMemory.available"
	signalPIDAvailable               = "pid.available"
)

// threshold is one parsed hard eviction threshold: the signal is met when what is
// available drops below quantity, or below percentage of the capacity.
type threshold struct {
	signal     string
	quantity   *resource.Quantity
	percentage float32 // as upstream, so that values match to the byte
}

// value is the threshold in the signal's unit for the given capacity.
func (t threshold) value(capacity int64) int64 {
	if t.quantity != nil {
		return t.quantity.Value()
	}
	return int64(float64(capacity) * float64(t.percentage))
}

// parseThresholds parses Options.EvictionHard as upstream does: a quantity must be
// positive, a percentage within [0%,100%]; "0%" and "100%" disable the signal.
func parseThresholds(m map[string]string) ([]threshold, error) {
	signals := make([]string, 0, len(m))
	for s := range m {
		signals = append(signals, s)
	}
	sort.Strings(signals)
	var out []threshold
	for _, signal := range signals {
		t, ok, err := parseThreshold(signal, strings.TrimSpace(m[signal]))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, t)
		}
	}
	return out, nil
}

func parseThreshold(signal, val string) (threshold, bool, error) {
	switch signal {
	case signalMemoryAvailable, signalNodeFsAvailable, signalNodeFsInodesFree, signalImageFsAvailable,
		signalImageFsInodesFree, signalContainerFsAvailable, signalContainerFsInodesFree,
		signalAllocatableMemoryAvailable, signalPIDAvailable:
	default:
		return threshold{}, false, fmt.Errorf("unsupported eviction signal %v", signal)
	}
	if pct, ok := strings.CutSuffix(val, "%"); ok {
		if val == "0%" || val == "100%" {
			return threshold{}, false, nil
		}
		p, err := strconv.ParseFloat(pct, 32)
		if err != nil {
			return threshold{}, false, fmt.Errorf("eviction threshold %v: %w", signal, err)
		}
		if p < 0 {
			return threshold{}, false, fmt.Errorf("eviction percentage threshold %v must be >= 0%%: %s", signal, val)
		}
		if p > 100 {
			return threshold{}, false, fmt.Errorf("eviction percentage threshold %v must be <= 100%%: %s", signal, val)
		}
		return threshold{signal: signal, percentage: float32(p) / 100}, true, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return threshold{}, false, fmt.Errorf("eviction threshold %v: %w", signal, err)
	}
	if q.Sign() <= 0 {
		return threshold{}, false, fmt.Errorf("eviction threshold %v must be positive: %s", signal, q.String())
	}
	return threshold{signal: signal, quantity: &q}, true, nil
}

// hardEvictionReservation is what the memory.available and nodefs.available
// thresholds hold back from allocatable, for the given capacity.
func hardEvictionReservation(thresholds []threshold, capacity v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for _, t := range thresholds {
		var name v1.ResourceName
		switch t.signal {
		case signalMemoryAvailable:
			name = v1.ResourceMemory
		case signalNodeFsAvailable:
			name = v1.ResourceEphemeralStorage
		default:
			continue
		}
		c := capacity[name]
		if t.quantity != nil {
			out[name] = t.quantity.DeepCopy()
		} else {
			out[name] = *resource.NewQuantity(t.value(c.Value()), resource.BinarySI)
		}
	}
	return out
}

// allocatableReservation sums SystemReserved, KubeReserved and the hard eviction
// reservation for every resource in capacity, as upstream's
// GetNodeAllocatableReservation.
func allocatableReservation(capacity, systemReserved, kubeReserved v1.ResourceList, thresholds []threshold) v1.ResourceList {
	eviction := hardEvictionReservation(thresholds, capacity)
	out := v1.ResourceList{}
	for name := range capacity {
		sum := resource.NewQuantity(0, resource.DecimalSI)
		for _, l := range []v1.ResourceList{systemReserved, kubeReserved, eviction} {
			if q, ok := l[name]; ok {
				sum.Add(q)
			}
		}
		if !sum.IsZero() {
			out[name] = *sum
		}
	}
	return out
}

// pressure is the set of node conditions the eviction signals drive.
type pressure struct {
	memory, disk, pid bool
}

// observePressure compares one usage sample with the thresholds.
func observePressure(thresholds []threshold, u usage) pressure {
	var p pressure
	for _, t := range thresholds {
		switch t.signal {
		case signalMemoryAvailable:
			p.memory = p.memory || (u.memoryCapacity > 0 && u.memoryAvailable < t.value(u.memoryCapacity))
		case signalNodeFsAvailable:
			p.disk = p.disk || (u.fsCapacity > 0 && u.fsAvailable < t.value(u.fsCapacity))
		case signalNodeFsInodesFree:
			p.disk = p.disk || (u.inodes > 0 && u.inodesFree < t.value(u.inodes))
		case signalPIDAvailable:
			p.pid = p.pid || (u.maxPID > 0 && u.maxPID-u.processes < t.value(u.maxPID))
		}
	}
	return p
}

// pressureTracker keeps a pressure condition True for period after the pressure
// was last observed, as upstream's evictionPressureTransitionPeriod.
type pressureTracker struct {
	period                  time.Duration
	memoryAt, diskAt, pidAt time.Time
}

// update records the observation made at now and returns the conditions to report.
func (t *pressureTracker) update(observed pressure, now time.Time) pressure {
	if observed.memory {
		t.memoryAt = now
	}
	if observed.disk {
		t.diskAt = now
	}
	if observed.pid {
		t.pidAt = now
	}
	recent := func(at time.Time) bool { return !at.IsZero() && now.Sub(at) < t.period }
	return pressure{memory: recent(t.memoryAt), disk: recent(t.diskAt), pid: recent(t.pidAt)}
}
