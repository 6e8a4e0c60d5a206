package podworkers

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// UpdateType says why an update was sent.
type UpdateType int

// Update types (upstream SyncPodType order).
const (
	// SyncPodSync is a periodic resync.
	SyncPodSync UpdateType = iota
	// SyncPodUpdate: the pod's spec changed.
	SyncPodUpdate
	// SyncPodCreate: the pod is new to the kubelet.
	SyncPodCreate
	// SyncPodKill: the pod must be terminated.
	SyncPodKill
)

func (t UpdateType) String() string {
	switch t {
	case SyncPodSync:
		return "sync"
	case SyncPodUpdate:
		return "update"
	case SyncPodCreate:
		return "create"
	case SyncPodKill:
		return "kill"
	}
	return fmt.Sprintf("UpdateType(%d)", int(t))
}

// PodWorkerState is where a pod is in its lifecycle.
type PodWorkerState int

const (
	// SyncPod: the pod is expected to be running.
	SyncPod PodWorkerState = iota
	// TerminatingPod: no new containers start; running ones are being stopped.
	TerminatingPod
	// TerminatedPod: no container runs; resources are being released.
	TerminatedPod
)

func (s PodWorkerState) String() string {
	switch s {
	case SyncPod:
		return "sync"
	case TerminatingPod:
		return "terminating"
	case TerminatedPod:
		return "terminated"
	}
	return fmt.Sprintf("PodWorkerState(%d)", int(s))
}

// PodWorkerSync summarises one worker for SyncKnownPods' caller.
type PodWorkerSync struct {
	// State of the pod.
	State PodWorkerState
	// Orphan is true if the pod was not in the desired set.
	Orphan bool
	// HasConfig is true if the worker has a pod spec (not only a RunningPod).
	HasConfig bool
	// Static is true if the spec came from a file or http source.
	Static bool
}

// KillPodOptions refines a SyncPodKill update.
type KillPodOptions struct {
	// PodTerminationGracePeriodSecondsOverride asks for a (shorter) grace period.
	PodTerminationGracePeriodSecondsOverride *int64
	// Evict marks the pod evicted: once terminated, its content (containers,
	// volumes, logs) may be removed although the pod is not deleted.
	Evict bool
	// CompletedCh is closed once the pod's containers are stopped
	// (SyncTerminatingPod succeeded), at once if that already happened, or when
	// the update is not a kill (the pod is not terminating).
	CompletedCh chan<- struct{}
}

// UpdatePodOptions is one update for UpdatePod. Pod is required unless
// RunningPod is set (an orphan in the runtime with no config), which can only
// be killed.
type UpdatePodOptions struct {
	UpdateType UpdateType
	// StartTime is when the update was made, the start of its
	// kubelet_pod_worker_duration_seconds; zero: when UpdatePod is called.
	// Updates merged while one is pending keep the oldest.
	StartTime      time.Time
	Pod            *v1.Pod
	RunningPod     *kubecontainer.Pod
	KillPodOptions *KillPodOptions
}

// SyncFuncs are the kubelet's steps the workers call. They must be safe for
// concurrent calls for different pods, and return promptly (with ctx.Err())
// when ctx is cancelled.
type SyncFuncs interface {
	// SyncPod makes the pod run as specified; isTerminal reports that the pod has
	// finished for good (its restart policy keeps it down).
	SyncPod(ctx context.Context, updateType UpdateType, pod *v1.Pod, podStatus *kubecontainer.PodStatus) (isTerminal bool, err error)
	// SyncTerminatingPod stops every container of the pod within gracePeriod
	// seconds; it is called again until it returns nil.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus, gracePeriod *int64) error
	// SyncTerminatedPod releases what the stopped pod still holds (volumes...);
	// it is called again until it returns nil.
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, podStatus *kubecontainer.PodStatus) error
}

// StatusCache gives the runtime status of a pod once it is newer than minTime;
// *kubecontainer.Cache satisfies it.
type StatusCache interface {
	GetNewerThan(ctx context.Context, uid k8stypes.UID, minTime time.Time) (*kubecontainer.PodStatus, error)
}

// Defaults for Options.
const (
	DefaultResyncInterval = time.Minute      // upstream --sync-frequency
	DefaultBackOffPeriod  = 10 * time.Second // upstream backOffPeriod
)

// Options configures PodWorkers.
type Options struct {
	// Sync is the kubelet (required).
	Sync SyncFuncs
	// Cache is the pod status cache (required).
	Cache StatusCache
	// ResyncInterval is the pause after a successful sync; 0: DefaultResyncInterval.
	ResyncInterval time.Duration
	// BackOffPeriod is the pause after a failed sync; 0: DefaultBackOffPeriod.
	BackOffPeriod time.Duration
	// Logger; nil: no logging.
	Logger *zap.Logger
	// Clock; nil: the real clock.
	Clock clock.Clock
	// Registerer receives kubelet_pod_worker_duration_seconds; nil: not
	// registered.
	Registerer prometheus.Registerer
}
