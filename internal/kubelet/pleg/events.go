package pleg

import (
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// containerState is a container's state as the PLEG compares it.
type containerState string

const (
	stateRunning     containerState = "running"
	stateExited      containerState = "exited"
	stateUnknown     containerState = "unknown" // also "created": the kubelet does not act on it
	stateNonExistent containerState = "non-existent"
)

// podRecord is a pod as the previous relist saw it (old) and as the current one
// sees it (current; nil when the runtime no longer has it).
type podRecord struct {
	old, current *kubecontainer.Pod
}

// podRecords holds the records of every pod seen by the last two relists.
type podRecords map[k8stypes.UID]*podRecord

// setCurrent replaces the current view with pods.
func (r podRecords) setCurrent(pods []*kubecontainer.Pod) {
	for _, rec := range r {
		rec.current = nil
	}
	for _, pod := range pods {
		if rec, ok := r[pod.ID]; ok {
			rec.current = pod
			continue
		}
		r[pod.ID] = &podRecord{current: pod}
	}
}

// update makes the current view of uid the old one (forgetting a vanished pod).
func (r podRecords) update(uid k8stypes.UID) {
	rec, ok := r[uid]
	if !ok {
		return
	}
	if rec.current == nil {
		delete(r, uid)
		return
	}
	rec.old, rec.current = rec.current, nil
}

// podEvents compares every container and sandbox of the two views of a pod.
func podEvents(uid k8stypes.UID, old, current *kubecontainer.Pod) []*PodLifecycleEvent {
	var events []*PodLifecycleEvent
	for _, id := range containerIDs(old, current) {
		events = append(events, generateEvents(uid, id, stateOf(old, id), stateOf(current, id))...)
	}
	return events
}

// containerIDs lists the runtime IDs of every container and sandbox of both
// views, old ones first, each once.
func containerIDs(pods ...*kubecontainer.Pod) []string {
	seen := map[string]bool{}
	var ids []string
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		for _, list := range [][]*kubecontainer.Container{pod.Containers, pod.Sandboxes} {
			for _, c := range list {
				if !seen[c.ID.ID] {
					seen[c.ID.ID] = true
					ids = append(ids, c.ID.ID)
				}
			}
		}
	}
	return ids
}

// stateOf finds a container (or sandbox) of pod by ID.
func stateOf(pod *kubecontainer.Pod, id string) containerState {
	if pod == nil {
		return stateNonExistent
	}
	for _, list := range [][]*kubecontainer.Container{pod.Containers, pod.Sandboxes} {
		for _, c := range list {
			if c.ID.ID == id {
				return convertState(c.State)
			}
		}
	}
	return stateNonExistent
}

// convertState maps a runtime state to the PLEG's.
func convertState(s kubecontainer.State) containerState {
	switch s {
	case kubecontainer.StateRunning:
		return stateRunning
	case kubecontainer.StateExited:
		return stateExited
	}
	return stateUnknown // created and unknown
}

// generateEvents is the transition table from oldState to newState.
func generateEvents(uid k8stypes.UID, id string, oldState, newState containerState) []*PodLifecycleEvent {
	if oldState == newState {
		return nil
	}
	ev := func(t PodLifecycleEventType) *PodLifecycleEvent {
		return &PodLifecycleEvent{ID: uid, Type: t, Data: id}
	}
	switch newState {
	case stateRunning:
		return []*PodLifecycleEvent{ev(ContainerStarted)}
	case stateExited:
		return []*PodLifecycleEvent{ev(ContainerDied)}
	case stateUnknown:
		return []*PodLifecycleEvent{ev(ContainerChanged)}
	}
	// stateNonExistent
	if oldState == stateExited {
		// Its death was reported already.
		return []*PodLifecycleEvent{ev(ContainerRemoved)}
	}
	return []*PodLifecycleEvent{ev(ContainerDied), ev(ContainerRemoved)}
}
