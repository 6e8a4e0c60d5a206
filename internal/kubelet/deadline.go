package kubelet

import (
	"time"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
)

// Upstream's reason and message of a pod past its activeDeadlineSeconds.
const (
	reasonDeadlineExceeded  = "DeadlineExceeded"
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// podStatusReader gives the status the kubelet last set for a pod.
type podStatusReader interface {
	GetPodStatus(uid k8stypes.UID) (v1.PodStatus, bool)
}

// activeDeadline enforces spec.activeDeadlineSeconds as upstream's
// activeDeadlineHandler: a pod active on the node (since its status's
// startTime) for that long is synced (pastDeadline, asked every second) and
// its generated status becomes Failed with reason DeadlineExceeded
// (ShouldEvict, which also records the Normal event), so the pod worker
// stops it.
type activeDeadline struct {
	clock    clock.Clock
	status   podStatusReader
	recorder record.EventRecorder
}

// ShouldEvict reports whether the pod is past its deadline, recording the
// event when it is; reason and message go into the pod's status.
func (d *activeDeadline) ShouldEvict(pod *v1.Pod) (reason, message string, evict bool) {
	if !d.pastDeadline(pod) {
		return "", "", false
	}
	d.recorder.Eventf(pod, v1.EventTypeNormal, reasonDeadlineExceeded, "%s", messageDeadlineExceeded)
	return reasonDeadlineExceeded, messageDeadlineExceeded, true
}

// pastDeadline: the pod has a deadline, has started, and has been active
// for at least the deadline.
func (d *activeDeadline) pastDeadline(pod *v1.Pod) bool {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return false
	}
	st, ok := d.status.GetPodStatus(pod.UID)
	if !ok {
		st = pod.Status
	}
	if st.StartTime == nil || st.StartTime.IsZero() {
		return false
	}
	return d.clock.Since(st.StartTime.Time) >= time.Duration(*pod.Spec.ActiveDeadlineSeconds)*time.Second
}
