package kubelet

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

// statusMap is a podStatusReader.
type statusMap map[k8stypes.UID]v1.PodStatus

func (m statusMap) GetPodStatus(uid k8stypes.UID) (v1.PodStatus, bool) {
	s, ok := m[uid]
	return s, ok
}

func TestActiveDeadline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(t0.Add(10 * time.Second))
	started := metav1.NewTime(t0)
	d := &activeDeadline{clock: clk, status: statusMap{"stored": {StartTime: &started}}}
	deadline := func(s int64) *int64 { return &s }
	for _, tc := range []struct {
		desc     string
		uid      k8stypes.UID
		deadline *int64
		start    *metav1.Time // in the pod's own status
		want     bool
	}{
		{desc: "no deadline", uid: "stored"},
		{desc: "stored start, deadline reached", uid: "stored", deadline: deadline(10), want: true},
		{desc: "stored start, deadline not reached", uid: "stored", deadline: deadline(11)},
		{desc: "not started", uid: "other", deadline: deadline(1)},
		{desc: "the pod's own start time", uid: "other", deadline: deadline(5), start: &started, want: true},
	} {
		pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: tc.uid}}
		pod.Spec.ActiveDeadlineSeconds, pod.Status.StartTime = tc.deadline, tc.start
		recorder := &eventtest.Recorder{}
		d.recorder = recorder
		reason, msg, evict := d.ShouldEvict(pod)
		events := recorder.Strings()
		if evict != tc.want || d.pastDeadline(pod) != tc.want {
			t.Errorf("%s: evict %v, want %v", tc.desc, evict, tc.want)
		}
		if tc.want && (reason != "DeadlineExceeded" || msg != "Pod was active on the node longer than the specified deadline" ||
			len(events) != 1 || events[0] != "Normal DeadlineExceeded "+msg) {
			t.Errorf("%s: %q %q events %v", tc.desc, reason, msg, events)
		}
	}
}
