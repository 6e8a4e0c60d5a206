package eviction

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestAdmit(t *testing.T) {
	t.Parallel()
	mem, disk, pid := v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure
	bestEffort := newPod("be")
	burstable := newPod("burstable", requests("memory", "100Mi"))
	guaranteed := newPod("guaranteed", requests("cpu", "1", "memory", "1Gi"), limits("cpu", "1", "memory", "1Gi"))
	tolerates := func(tol v1.Toleration) *v1.Pod {
		p := newPod("tolerant")
		p.Spec.Tolerations = []v1.Toleration{tol}
		return p
	}
	static := newPod("static", annotated("kubernetes.io/config.source", "file"))
	mirror := newPod("mirror", annotated("kubernetes.io/config.mirror", "abc"))
	systemCritical := newPod("critical", priorityOf(2000000000))
	almostCritical := newPod("almost", priorityOf(1999999999))
	apiSource := newPod("api", annotated("kubernetes.io/config.source", "api"))
	for _, tc := range []struct {
		desc    string
		conds   []v1.NodeConditionType
		pod     *v1.Pod
		wantMsg string // "" = admitted
	}{
		{desc: "no pressure admits best effort", pod: bestEffort},
		{desc: "memory pressure rejects best effort", conds: []v1.NodeConditionType{mem}, pod: bestEffort,
			wantMsg: "The node had condition: [MemoryPressure]. "},
		{desc: "memory pressure admits burstable", conds: []v1.NodeConditionType{mem}, pod: burstable},
		{desc: "memory pressure admits guaranteed", conds: []v1.NodeConditionType{mem}, pod: guaranteed},
		{desc: "memory pressure admits a best effort pod tolerating it", conds: []v1.NodeConditionType{mem},
			pod: tolerates(v1.Toleration{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule})},
		{desc: "a toleration of any effect tolerates it", conds: []v1.NodeConditionType{mem},
			pod: tolerates(v1.Toleration{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists})},
		{desc: "an Exists toleration without key tolerates everything", conds: []v1.NodeConditionType{mem},
			pod: tolerates(v1.Toleration{Operator: v1.TolerationOpExists})},
		{desc: "a NoExecute toleration does not", conds: []v1.NodeConditionType{mem},
			pod:     tolerates(v1.Toleration{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoExecute}),
			wantMsg: "The node had condition: [MemoryPressure]. "},
		{desc: "a disk pressure toleration does not", conds: []v1.NodeConditionType{mem},
			pod:     tolerates(v1.Toleration{Key: v1.TaintNodeDiskPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}),
			wantMsg: "The node had condition: [MemoryPressure]. "},
		{desc: "disk pressure rejects guaranteed", conds: []v1.NodeConditionType{disk}, pod: guaranteed,
			wantMsg: "The node had condition: [DiskPressure]. "},
		{desc: "pid pressure rejects burstable", conds: []v1.NodeConditionType{pid}, pod: burstable,
			wantMsg: "The node had condition: [PIDPressure]. "},
		{desc: "memory and disk pressure reject burstable", conds: []v1.NodeConditionType{disk, mem}, pod: burstable,
			wantMsg: "The node had condition: [MemoryPressure DiskPressure]. "},
		{desc: "memory pressure toleration does not help under disk pressure", conds: []v1.NodeConditionType{mem, disk},
			pod:     tolerates(v1.Toleration{Operator: v1.TolerationOpExists}),
			wantMsg: "The node had condition: [MemoryPressure DiskPressure]. "},
		{desc: "static pods are critical", conds: []v1.NodeConditionType{mem, disk, pid}, pod: static},
		{desc: "mirror pods are critical", conds: []v1.NodeConditionType{disk}, pod: mirror},
		{desc: "system critical priority", conds: []v1.NodeConditionType{disk}, pod: systemCritical},
		{desc: "just below system critical", conds: []v1.NodeConditionType{disk}, pod: almostCritical,
			wantMsg: "The node had condition: [DiskPressure]. "},
		{desc: "api pods are not critical", conds: []v1.NodeConditionType{pid}, pod: apiSource,
			wantMsg: "The node had condition: [PIDPressure]. "},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			m, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range tc.conds {
				m.conditions[c] = true
			}
			reason, msg, ok := m.Admit(tc.pod)
			if tc.wantMsg == "" {
				if !ok || reason != "" || msg != "" {
					t.Errorf("Admit = %q, %q, %v; want admitted", reason, msg, ok)
				}
				return
			}
			if ok || reason != "Evicted" || msg != tc.wantMsg {
				t.Errorf("Admit = %q, %q, %v; want \"Evicted\", %q, false", reason, msg, ok, tc.wantMsg)
			}
		})
	}
}

func TestPressureAccessors(t *testing.T) {
	t.Parallel()
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m.IsUnderMemoryPressure() || m.IsUnderDiskPressure() || m.IsUnderPIDPressure() {
		t.Fatal("a new manager reports pressure")
	}
	m.conditions[v1.NodeDiskPressure] = true
	if m.IsUnderMemoryPressure() || !m.IsUnderDiskPressure() || m.IsUnderPIDPressure() {
		t.Error("accessors do not follow the conditions")
	}
}
