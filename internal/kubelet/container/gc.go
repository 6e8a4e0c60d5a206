package container

import (
	"time"

	k8stypes "k8s.io/apimachinery/pkg/types"
)

// GCPolicy is the container garbage collection policy.
type GCPolicy struct {
	// MinAge is the minimum age of a dead container before it may be removed.
	MinAge time.Duration
	// MaxPerPodContainer is how many dead instances of each container of a pod
	// are kept; negative means no limit.
	MaxPerPodContainer int
	// MaxContainers is how many dead containers are kept in total; negative
	// means no limit.
	MaxContainers int
}

// DefaultGCPolicy is the kubelet's default: no minimum age, one dead instance
// per container, no global limit.
func DefaultGCPolicy() GCPolicy {
	return GCPolicy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}
}

// PodStateProvider tells the GC what the kubelet knows about pods (the pod
// workers implement it).
type PodStateProvider interface {
	IsPodTerminationRequested(uid k8stypes.UID) bool
	ShouldPodContentBeRemoved(uid k8stypes.UID) bool
	ShouldPodRuntimeBeRemoved(uid k8stypes.UID) bool
}
