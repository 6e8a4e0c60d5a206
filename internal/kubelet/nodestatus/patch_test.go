package nodestatus

import (
	"encoding/json"
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

func TestNodeStatusPatch(t *testing.T) {
	t.Parallel()
	old := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "1"}},
		Spec:       v1.NodeSpec{Unschedulable: false},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{
			{Type: v1.NodeInternalIP, Address: "10.0.0.1"}, {Type: v1.NodeHostName, Address: "n"}}},
	}
	for _, test := range []struct {
		desc   string
		change func(n *v1.Node)
		want   string
	}{
		{desc: "nothing", change: func(*v1.Node) {}, want: `{}`},
		{desc: "spec is ignored", change: func(n *v1.Node) { n.Spec.Unschedulable = true }, want: `{}`},
		{desc: "labels go through", change: func(n *v1.Node) { n.Labels["b"] = "2" },
			want: `{"metadata":{"labels":{"b":"2"}}}`},
		{desc: "addresses are replaced", change: func(n *v1.Node) { n.Status.Addresses[0].Address = "10.0.0.2" },
			want: `{"status":{"addresses":[{"address":"10.0.0.2","type":"InternalIP"},{"address":"n","type":"Hostname"},{"$patch":"replace"}]}}`},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			n := old.DeepCopy()
			test.change(n)
			got, err := nodeStatusPatch(old, n)
			if err != nil {
				t.Fatal(err)
			}
			if !jsonEqual(t, got, []byte(test.want)) {
				t.Errorf("patch = %s, want %s", got, test.want)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
