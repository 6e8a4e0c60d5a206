package nodepatch

import (
	"encoding/json"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStatusPatch(t *testing.T) {
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
			got, err := statusPatch(old, n)
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
