// Package status keeps the kubelet's local view of every pod's API status
// (v1.PodStatus): the status the sync loop computed last, merged with the
// readiness and startup results the prober reports in between syncs.
//
// The store enforces the invariants upstream's status manager enforces: a
// terminal phase (Succeeded, Failed) never changes, a terminated container
// does not come back to life unless the restart policy allows it, condition
// transition times only move when a condition's status changes, the start
// time is set once, and the status's observedGeneration (the generation of
// the spec it was computed from) never moves backwards.
//
// A Syncer (sync.go) publishes the store to the API server: every change is patched soon after it happens, a resync every 10 s
// patches what was not acknowledged, static pods' statuses go to their mirror
// pods (mirror.go), and pods being deleted are removed once their status is
// final and their resources are reclaimed. Without one (a standalone kubelet)
// the store is only read locally (the kubelet's pods endpoint).
//
// Only internal/kubelet (the coordinator, and its apistatus) and internal/app may
// import it.
package status

import (
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// ContainerReasonStatusUnknown is the reason of a terminated state the kubelet
// synthesises for a container whose runtime status went missing.
const ContainerReasonStatusUnknown = "ContainerStatusUnknown"

// DefaultSyncPeriod is how often Syncer.Run re-checks every status against the API
// server (upstream's syncPeriod).
const DefaultSyncPeriod = 10 * time.Second

// PodDeletionSafetyProvider tells whether a pod's containers may still run
// (its terminal phase is held back until they may not) and whether its node
// resources (containers, volumes) are gone, so that its API object may be
// removed.
type PodDeletionSafetyProvider interface {
	PodCouldHaveRunningContainers(pod *v1.Pod) bool
	PodResourcesAreReclaimed(pod *v1.Pod) bool
}

// Options configures a Manager.
type Options struct {
	Logger *zap.Logger
	// Clock stamps condition transitions and start times; nil = the real clock.
	Clock clock.PassiveClock
	// RestartRules says which terminated containers may run again (the
	// ContainerRestartRules gate); the zero value is upstream's default.
	RestartRules kubecontainer.RestartRules
}

// Manager is the thread-safe local pod status store.
type Manager struct {
	logger *zap.Logger
	clock  clock.PassiveClock
	rules  kubecontainer.RestartRules
	// changed wakes the sync loop (capacity 1: pending wake-ups coalesce).
	changed chan struct{}

	mu   sync.RWMutex
	pods map[k8stypes.UID]*entry
	// acked is the API sync's bookkeeping per source pod UID (sync.go).
	acked map[k8stypes.UID]ack
}

// entry is one pod's cached status plus the pod it belongs to (the spec is needed
// to recompute readiness conditions when a probe result arrives).
type entry struct {
	pod    *v1.Pod
	status v1.PodStatus
	// version grows with every change the API should see.
	version uint64
	// finished: TerminatePod ran; the status is final.
	finished bool
}

// NewManager returns an empty store.
func NewManager(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Manager{
		logger:  opts.Logger,
		clock:   opts.Clock,
		rules:   opts.RestartRules,
		changed: make(chan struct{}, 1),
		pods:    map[k8stypes.UID]*entry{},
		acked:   map[k8stypes.UID]ack{},
	}
}

// GetPodStatus returns a copy of the cached status of the pod.
func (m *Manager) GetPodStatus(uid k8stypes.UID) (v1.PodStatus, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.pods[uid]
	if !ok {
		return v1.PodStatus{}, false
	}
	return *e.status.DeepCopy(), true
}

// PodPhase returns the phase of the pod's cached status (no copy of the rest).
func (m *Manager) PodPhase(uid k8stypes.UID) (v1.PodPhase, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.pods[uid]
	if !ok {
		return "", false
	}
	return e.status.Phase, true
}

// SetPodStatus caches status as the pod's latest status. An update that would
// move a terminated container back to running against the restart policy is
// dropped (and logged); a terminal phase is kept whatever the new phase says.
// A pod with a deletionTimestamp is always queued for the API sync, so that
// its final deletion gets a chance.
func (m *Manager) SetPodStatus(pod *v1.Pod, status v1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.updateLocked(pod, *status.DeepCopy(), pod.DeletionTimestamp != nil, false)
}

// SetContainerReadiness records a readiness probe result for the container and
// recomputes the pod's ContainersReady and Ready conditions.
func (m *Manager) SetContainerReadiness(uid k8stypes.UID, containerID kubecontainer.ContainerID, ready bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[uid]
	if !ok {
		m.logger.Debug("readiness for a pod without status", zap.String("podUID", string(uid)))
		return
	}
	status := *e.status.DeepCopy()
	cs := findContainerStatus(&status, containerID.String())
	if cs == nil {
		m.logger.Debug("readiness for an unknown container", zap.String("podUID", string(uid)),
			zap.String("containerID", containerID.String()))
		return
	}
	if cs.Ready == ready {
		return
	}
	cs.Ready = ready
	all := allContainerStatuses(&status)
	replaceCondition(&status, GeneratePodReadyCondition(e.pod, status.Conditions, all, status.Phase))
	replaceCondition(&status, GenerateContainersReadyCondition(e.pod, all, status.Phase))
	m.updateLocked(e.pod, status, false, false)
}

// SetContainerStartup records a startup probe result for the container.
func (m *Manager) SetContainerStartup(uid k8stypes.UID, containerID kubecontainer.ContainerID, started bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.pods[uid]
	if !ok {
		return
	}
	status := *e.status.DeepCopy()
	cs := findContainerStatus(&status, containerID.String())
	if cs == nil {
		return
	}
	if cs.Started != nil && *cs.Started == started {
		return
	}
	cs.Started = &started
	m.updateLocked(e.pod, status, false, false)
}

// TerminatePod marks every container of the pod that has no terminated state as
// terminated (ContainerStatusUnknown, exit code 137) once the pod has
// initialized, does the same for the init containers that had started, and moves
// a non-static pod to the Failed phase unless it already is terminal. It is
// called after the pod's containers were killed; from then on the status is
// final (the API sync may delete a pod that is being deleted).
func (m *Manager) TerminatePod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := &pod.Status
	if e, ok := m.pods[pod.UID]; ok {
		old = &e.status
	}
	status := *old.DeepCopy()
	if hasPodInitialized(pod, &status) {
		for i := range status.ContainerStatuses {
			markUnknownTerminated(&status.ContainerStatuses[i])
		}
	}
	for i := range initializedContainers(status.InitContainerStatuses) {
		markUnknownTerminated(&status.InitContainerStatuses[i])
	}
	// Upstream leaves static pods in their phase (kubernetes#116484); so do we.
	if !kubecontainer.IsStaticPod(pod) && !IsTerminal(status.Phase) {
		status.Phase = v1.PodFailed
	}
	m.updateLocked(pod, status, true, true)
}

// RemoveOrphanedStatuses forgets the statuses of pods not in podUIDs, and
// what the API sync knew about them.
func (m *Manager) RemoveOrphanedStatuses(podUIDs map[k8stypes.UID]bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid := range m.pods {
		if !podUIDs[uid] {
			delete(m.pods, uid)
		}
	}
	for uid := range m.acked {
		if !podUIDs[uid] {
			delete(m.acked, uid)
		}
	}
}

// updateLocked merges status into the cache and, when it changed (or force),
// bumps the pod's version and wakes the API sync; m.mu must be held. finished
// marks the status final (sticky).
func (m *Manager) updateLocked(pod *v1.Pod, status v1.PodStatus, force, finished bool) {
	old := pod.Status
	prev, cached := m.pods[pod.UID]
	if cached {
		old = prev.status
	}
	if err := checkContainerStateTransition(&old, &status, &pod.Spec, m.rules); err != nil {
		m.logger.Error("dropping pod status update", zap.String("pod", pod.Namespace+"/"+pod.Name), zap.Error(err))
		return
	}
	if IsTerminal(old.Phase) && status.Phase != old.Phase {
		m.logger.Warn("pod attempted to leave a terminal phase; keeping it",
			zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("phase", string(old.Phase)),
			zap.String("attempted", string(status.Phase)))
		status.Phase = old.Phase
	}
	stampGeneration(pod, &old, &status)
	now := metav1.NewTime(m.clock.Now())
	for i := range status.Conditions {
		c := &status.Conditions[i]
		if prev := findCondition(old.Conditions, c.Type); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		} else if c.LastTransitionTime.IsZero() || prev != nil {
			c.LastTransitionTime = now
		}
	}
	switch {
	case old.StartTime != nil && !old.StartTime.IsZero():
		status.StartTime = old.StartTime.DeepCopy()
	case status.StartTime == nil || status.StartTime.IsZero():
		status.StartTime = &now
	}
	e := &entry{pod: pod, status: status, finished: finished}
	if cached {
		e.version, e.finished = prev.version, prev.finished || finished
	}
	if !cached || force || !apiequality.Semantic.DeepEqual(prev.status, status) {
		e.version++
		m.notifyLocked()
	}
	m.pods[pod.UID] = e
}

// generatedConditions are the conditions the kubelet computes from the spec
// it syncs; each carries the generation of that spec. (The resize conditions
// keep the generation of the resize they are about, DisruptionTarget the one
// its setter gave it.)
var generatedConditions = map[v1.PodConditionType]bool{
	v1.PodScheduled:              true,
	v1.PodReady:                  true,
	v1.PodInitialized:            true,
	v1.ContainersReady:           true,
	v1.PodReadyToStartContainers: true,
}

// stampGeneration sets the generation of the pod spec the status was computed
// from as the status's observedGeneration (never below old's) and as the
// observedGeneration of the conditions computed from that spec, as upstream
// does with PodObservedGenerationTracking (GA, locked on).
func stampGeneration(pod *v1.Pod, old, status *v1.PodStatus) {
	status.ObservedGeneration = max(pod.Generation, old.ObservedGeneration)
	for i := range status.Conditions {
		if generatedConditions[status.Conditions[i].Type] {
			status.Conditions[i].ObservedGeneration = pod.Generation
		}
	}
}

// notifyLocked wakes the sync loop without blocking; a wake-up already
// pending covers this change too.
func (m *Manager) notifyLocked() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// checkContainerStateTransition rejects a terminated container moving back to a
// non-terminated state when the restart policies (the pod's, or with
// ContainerRestartRules the container's own and its rules) would never restart
// it. Sidecars always may, and so may every container of a pod with a
// RestartAllContainers rule.
func checkContainerStateTransition(old, cur *v1.PodStatus, spec *v1.PodSpec, rules kubecontainer.RestartRules) error {
	if spec.RestartPolicy == v1.RestartPolicyAlways {
		return nil
	}
	if !rules.NoRestartAll && kubecontainer.AllContainersCouldRestart(spec) {
		// Any container may run again when the pod restarts all of them.
		return nil
	}
	for _, o := range old.ContainerStatuses {
		if o.State.Terminated == nil || terminatedMayRestart(spec, spec.Containers, o, rules) {
			continue
		}
		if n := findByName(cur.ContainerStatuses, o.Name); n != nil && n.State.Terminated == nil {
			return fmt.Errorf("terminated container %q attempted illegal transition to a non-terminated state", o.Name)
		}
	}
	for _, o := range old.InitContainerStatuses {
		if o.State.Terminated == nil || isRestartableInit(spec, o.Name) || terminatedMayRestart(spec, spec.InitContainers, o, rules) {
			continue
		}
		if n := findByName(cur.InitContainerStatuses, o.Name); n != nil && n.State.Terminated == nil {
			return fmt.Errorf("terminated init container %q attempted illegal transition to a non-terminated state", o.Name)
		}
	}
	return nil
}

// terminatedMayRestart reports whether the terminated container of status o,
// one of containers, may run again: a failure under the pod's OnFailure, or
// what rules say for its exit code.
func terminatedMayRestart(spec *v1.PodSpec, containers []v1.Container, o v1.ContainerStatus, rules kubecontainer.RestartRules) bool {
	code := o.State.Terminated.ExitCode
	if code != 0 && spec.RestartPolicy == v1.RestartPolicyOnFailure {
		return true
	}
	for i := range containers {
		if containers[i].Name == o.Name {
			return rules.ShouldRestart(&containers[i], spec, code)
		}
	}
	return false
}

func markUnknownTerminated(cs *v1.ContainerStatus) {
	if cs.State.Terminated != nil {
		return
	}
	cs.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		Reason:   ContainerReasonStatusUnknown,
		Message:  "The container could not be located when the pod was terminated",
		ExitCode: 137,
	}}
}

// hasPodInitialized reports whether the pod's init containers are done, judged
// from the status: no init containers, a regular container that left waiting, or a
// last init container that completed (or, for a sidecar, started).
func hasPodInitialized(pod *v1.Pod, status *v1.PodStatus) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return true
	}
	for _, cs := range status.ContainerStatuses {
		if cs.LastTerminationState.Terminated != nil || cs.State.Waiting == nil {
			return true
		}
	}
	n := len(status.InitContainerStatuses)
	if n == 0 {
		return false
	}
	last := status.InitContainerStatuses[n-1]
	if isRestartableInit(&pod.Spec, last.Name) {
		return last.State.Running != nil && last.Started != nil && *last.Started
	}
	for _, t := range []*v1.ContainerStateTerminated{last.LastTerminationState.Terminated, last.State.Terminated} {
		if t != nil && t.ExitCode == 0 {
			return true
		}
	}
	return false
}

// initializedContainers returns the init container statuses up to the last one
// with evidence of having started.
func initializedContainers(statuses []v1.ContainerStatus) []v1.ContainerStatus {
	for i := len(statuses) - 1; i >= 0; i-- {
		if statuses[i].State.Waiting == nil || statuses[i].LastTerminationState.Terminated != nil {
			return statuses[:i+1]
		}
	}
	return nil
}

// IsTerminal reports whether a pod phase is final (Succeeded or Failed).
func IsTerminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

func isRestartableInit(spec *v1.PodSpec, name string) bool {
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.Name == name {
			return IsRestartableInitContainer(c)
		}
	}
	return false
}

// IsRestartableInitContainer reports whether an init container is a sidecar
// (restartPolicy Always).
func IsRestartableInitContainer(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func findContainerStatus(status *v1.PodStatus, id string) *v1.ContainerStatus {
	for _, list := range [][]v1.ContainerStatus{status.ContainerStatuses, status.InitContainerStatuses} {
		for i := range list {
			if list[i].ContainerID == id {
				return &list[i]
			}
		}
	}
	return nil
}

func findByName(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func findCondition(list []v1.PodCondition, t v1.PodConditionType) *v1.PodCondition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

func replaceCondition(status *v1.PodStatus, c v1.PodCondition) {
	if prev := findCondition(status.Conditions, c.Type); prev != nil {
		*prev = c
		return
	}
	status.Conditions = append(status.Conditions, c)
}

func allContainerStatuses(status *v1.PodStatus) []v1.ContainerStatus {
	all := make([]v1.ContainerStatus, 0, len(status.InitContainerStatuses)+len(status.ContainerStatuses))
	all = append(all, status.InitContainerStatuses...)
	return append(all, status.ContainerStatuses...)
}
