package nodestatus

import (
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// pressure is the set of node conditions the eviction signals drive.
type pressure struct {
	memory, disk, pid bool
}

// observePressure compares one usage sample with the thresholds.
func observePressure(thresholds []resources.Threshold, u usage) pressure {
	var p pressure
	for _, t := range thresholds {
		switch t.Signal {
		case resources.SignalMemoryAvailable:
			p.memory = p.memory || (u.memoryCapacity > 0 && u.memoryAvailable < t.Value(u.memoryCapacity))
		case resources.SignalNodeFsAvailable:
			p.disk = p.disk || (u.fsCapacity > 0 && u.fsAvailable < t.Value(u.fsCapacity))
		case resources.SignalNodeFsInodesFree:
			p.disk = p.disk || (u.inodes > 0 && u.inodesFree < t.Value(u.inodes))
		case resources.SignalPIDAvailable:
			p.pid = p.pid || (u.maxPID > 0 && u.maxPID-u.processes < t.Value(u.maxPID))
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
