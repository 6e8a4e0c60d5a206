package nodestatus

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// statusChanged reports whether status differs from old in anything but the
// conditions' heartbeat times.
func statusChanged(old, status *v1.NodeStatus) bool {
	if conditionsChanged(old.Conditions, status.Conditions) {
		return true
	}
	a, b := old.DeepCopy(), status.DeepCopy()
	a.Conditions, b.Conditions = nil, nil
	return !equality.Semantic.DeepEqual(a, b)
}

// conditionsChanged compares two condition lists by type, ignoring heartbeat times.
func conditionsChanged(old, conds []v1.NodeCondition) bool {
	if len(old) != len(conds) {
		return true
	}
	a := append([]v1.NodeCondition(nil), old...)
	b := append([]v1.NodeCondition(nil), conds...)
	sort.SliceStable(a, func(i, j int) bool { return a[i].Type < a[j].Type })
	sort.SliceStable(b, func(i, j int) bool { return b[i].Type < b[j].Type })
	for i := range a {
		a[i].LastHeartbeatTime, b[i].LastHeartbeatTime = metav1.Time{}, metav1.Time{}
		if !equality.Semantic.DeepEqual(a[i], b[i]) {
			return true
		}
	}
	return false
}

// findCondition returns the condition of type t in conds, or nil.
func findCondition(conds []v1.NodeCondition, t v1.NodeConditionType) *v1.NodeCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}
