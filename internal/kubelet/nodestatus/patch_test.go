package nodestatus

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStatusChanged(t *testing.T) {
	t.Parallel()
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	base := v1.NodeStatus{
		Capacity: v1.ResourceList{"cpu": resource.MustParse("2")},
		Conditions: []v1.NodeCondition{
			{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, LastHeartbeatTime: t0, LastTransitionTime: t0},
			{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: t0, LastTransitionTime: t0},
		},
	}
	for _, test := range []struct {
		desc   string
		change func(s *v1.NodeStatus)
		want   bool
	}{
		{desc: "same", change: func(*v1.NodeStatus) {}},
		{desc: "heartbeat only", change: func(s *v1.NodeStatus) { s.Conditions[1].LastHeartbeatTime = t1 }},
		{desc: "conditions reordered", change: func(s *v1.NodeStatus) {
			s.Conditions[0], s.Conditions[1] = s.Conditions[1], s.Conditions[0]
		}},
		{desc: "condition status", change: func(s *v1.NodeStatus) { s.Conditions[1].Status = v1.ConditionFalse }, want: true},
		{desc: "condition message", change: func(s *v1.NodeStatus) { s.Conditions[1].Message = "x" }, want: true},
		{desc: "condition added", change: func(s *v1.NodeStatus) {
			s.Conditions = append(s.Conditions, v1.NodeCondition{Type: v1.NodePIDPressure})
		}, want: true},
		{desc: "capacity", change: func(s *v1.NodeStatus) { s.Capacity["cpu"] = resource.MustParse("3") }, want: true},
		{desc: "capacity same value other format", change: func(s *v1.NodeStatus) { s.Capacity["cpu"] = resource.MustParse("2000m") }},
		{desc: "nodeInfo", change: func(s *v1.NodeStatus) { s.NodeInfo.BootID = "b" }, want: true},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			s := base.DeepCopy()
			test.change(s)
			if got := statusChanged(&base, s); got != test.want {
				t.Errorf("statusChanged = %v, want %v", got, test.want)
			}
		})
	}
}
