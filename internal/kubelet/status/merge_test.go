package status

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

var (
	tSched = metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	tOld   = metav1.NewTime(time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC))
	tNew   = metav1.NewTime(time.Date(2025, 1, 1, 0, 2, 0, 0, time.UTC))
	tNow   = metav1.NewTime(time.Date(2025, 1, 1, 0, 3, 0, 0, time.UTC))
)

func cond(t v1.PodConditionType, s v1.ConditionStatus, at metav1.Time) v1.PodCondition {
	return v1.PodCondition{Type: t, Status: s, LastTransitionTime: at}
}

func condTypes(cs []v1.PodCondition) string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c.Type)+"="+string(c.Status))
	}
	return strings.Join(out, ",")
}

func mergePod(policy v1.RestartPolicy) *v1.Pod {
	return &v1.Pod{Spec: v1.PodSpec{RestartPolicy: policy, Containers: []v1.Container{{Name: "a"}}}}
}

func withID(cs v1.ContainerStatus, id string, restarts int32) v1.ContainerStatus {
	cs.ContainerID, cs.RestartCount = id, restarts
	return cs
}

func TestMergePodStatus(t *testing.T) {
	t.Parallel()
	gate := v1.PodConditionType("example.com/gate")
	for _, tc := range []struct {
		desc   string
		policy v1.RestartPolicy
		api    v1.PodStatus
		local  v1.PodStatus
		check  func(t *testing.T, got v1.PodStatus)
	}{
		{
			desc: "conditions: foreign ones kept in place, owned ones from the kubelet, scheduler's PodScheduled kept",
			api: v1.PodStatus{Conditions: []v1.PodCondition{
				cond(v1.PodScheduled, v1.ConditionTrue, tSched),
				cond(gate, v1.ConditionTrue, tOld),
				cond(v1.PodReady, v1.ConditionFalse, tOld),
				cond(v1.ContainersReady, v1.ConditionTrue, tOld),
			}},
			local: v1.PodStatus{Conditions: []v1.PodCondition{
				cond(gate, v1.ConditionFalse, tNew), // a stale copy: the API's wins
				cond(v1.PodInitialized, v1.ConditionTrue, tNew),
				cond(v1.PodReady, v1.ConditionTrue, tNew),
				cond(v1.ContainersReady, v1.ConditionTrue, tNew),
				cond(v1.PodScheduled, v1.ConditionTrue, tNew),
			}},
			check: func(t *testing.T, got v1.PodStatus) {
				if s := condTypes(got.Conditions); s != "PodScheduled=True,example.com/gate=True,Ready=True,ContainersReady=True,Initialized=True" {
					t.Fatalf("conditions = %s", s)
				}
				if c := findCondition(got.Conditions, v1.PodScheduled); !c.LastTransitionTime.Equal(&tSched) {
					t.Errorf("PodScheduled time = %v, want the scheduler's", c.LastTransitionTime)
				}
				if c := findCondition(got.Conditions, v1.PodReady); !c.LastTransitionTime.Equal(&tNew) {
					t.Errorf("Ready changed status: time = %v, want the kubelet's", c.LastTransitionTime)
				}
				if c := findCondition(got.Conditions, v1.ContainersReady); !c.LastTransitionTime.Equal(&tOld) {
					t.Errorf("ContainersReady unchanged: time = %v, want the API's", c.LastTransitionTime)
				}
			},
		},
		{
			desc: "conditions: an owned condition the kubelet dropped is removed, PodScheduled False is replaced",
			api: v1.PodStatus{Conditions: []v1.PodCondition{
				cond(v1.PodScheduled, v1.ConditionFalse, tOld),
				cond(v1.PodResizePending, v1.ConditionTrue, tOld),
				cond(v1.DisruptionTarget, v1.ConditionTrue, tOld),
			}},
			local: v1.PodStatus{Conditions: []v1.PodCondition{cond(v1.PodScheduled, v1.ConditionTrue, tNew)}},
			check: func(t *testing.T, got v1.PodStatus) {
				if s := condTypes(got.Conditions); s != "PodScheduled=True,DisruptionTarget=True" {
					t.Fatalf("conditions = %s", s)
				}
			},
		},
		{
			desc:  "DisruptionTarget from the kubelet is sent with the transition to a terminal phase only",
			api:   v1.PodStatus{Phase: v1.PodRunning},
			local: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{cond(v1.DisruptionTarget, v1.ConditionTrue, tNew)}},
			check: func(t *testing.T, got v1.PodStatus) {
				if len(got.Conditions) != 0 {
					t.Fatalf("conditions = %s, want none", condTypes(got.Conditions))
				}
				got = mergePodStatus(mergePod(v1.RestartPolicyNever), v1.PodStatus{Phase: v1.PodRunning},
					v1.PodStatus{Phase: v1.PodFailed, Conditions: []v1.PodCondition{cond(v1.DisruptionTarget, v1.ConditionTrue, tNew)}}, tNow, false, kubecontainer.RestartRules{})
				if s := condTypes(got.Conditions); s != "DisruptionTarget=True" {
					t.Fatalf("terminal: conditions = %s", s)
				}
				// While the containers may still run, the phase stays (upstream holds
				// a terminal phase back); DisruptionTarget goes already.
				held := mergePodStatus(mergePod(v1.RestartPolicyNever), v1.PodStatus{Phase: v1.PodRunning},
					v1.PodStatus{Phase: v1.PodFailed, Reason: "Evicted", Message: "m",
						Conditions: []v1.PodCondition{cond(v1.DisruptionTarget, v1.ConditionTrue, tNew)}}, tNow, true, kubecontainer.RestartRules{})
				if held.Phase != v1.PodRunning || held.Reason != "" || condTypes(held.Conditions) != "DisruptionTarget=True" {
					t.Fatalf("may be running: phase %s reason %q conditions %s, want Running, no reason, DisruptionTarget", held.Phase, held.Reason, condTypes(held.Conditions))
				}
			},
		},
		{
			desc:  "a terminal API phase never changes",
			api:   v1.PodStatus{Phase: v1.PodSucceeded, Reason: "Done", Message: "m"},
			local: v1.PodStatus{Phase: v1.PodRunning, Reason: "", Message: ""},
			check: func(t *testing.T, got v1.PodStatus) {
				if got.Phase != v1.PodSucceeded || got.Reason != "Done" || got.Message != "m" {
					t.Fatalf("phase = %s %q %q", got.Phase, got.Reason, got.Message)
				}
			},
		},
		{
			desc:   "restart counts never drop",
			policy: v1.RestartPolicyAlways,
			api:    v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(running("a", "docker://1"), "docker://1", 5)}},
			local:  v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(running("a", "docker://2"), "docker://2", 1)}},
			check: func(t *testing.T, got v1.PodStatus) {
				if cs := got.ContainerStatuses[0]; cs.RestartCount != 5 || cs.ContainerID != "docker://2" {
					t.Fatalf("status = %+v", cs)
				}
			},
		},
		{
			desc:   "the same container never goes from terminated back to running",
			policy: v1.RestartPolicyAlways,
			api:    v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(terminated("a", 0), "docker://1", 2)}},
			local:  v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(running("a", "docker://1"), "docker://1", 2)}},
			check: func(t *testing.T, got v1.PodStatus) {
				if got.ContainerStatuses[0].State.Terminated == nil {
					t.Fatalf("state = %+v, want terminated", got.ContainerStatuses[0].State)
				}
			},
		},
		{
			desc:   "restartPolicy Never: a terminated container is not replaced by a running one",
			policy: v1.RestartPolicyNever,
			api:    v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(terminated("a", 1), "docker://1", 0)}},
			local:  v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(running("a", "docker://2"), "docker://2", 0)}},
			check: func(t *testing.T, got v1.PodStatus) {
				if cs := got.ContainerStatuses[0]; cs.State.Terminated == nil || cs.ContainerID != "docker://1" {
					t.Fatalf("status = %+v", cs)
				}
			},
		},
		{
			desc:   "restartPolicy OnFailure: a failed container may run again",
			policy: v1.RestartPolicyOnFailure,
			api:    v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(terminated("a", 1), "docker://1", 0)}},
			local:  v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(running("a", "docker://2"), "docker://2", 1)}},
			check: func(t *testing.T, got v1.PodStatus) {
				if cs := got.ContainerStatuses[0]; cs.State.Running == nil || cs.RestartCount != 1 {
					t.Fatalf("status = %+v", cs)
				}
			},
		},
		{
			desc: "start time, IPs, QoS class, observed generation and scheduler fields are kept",
			api: v1.PodStatus{StartTime: &tOld, HostIP: "10.0.0.1", HostIPs: []v1.HostIP{{IP: "10.0.0.1"}},
				PodIP: "10.1.0.5", PodIPs: []v1.PodIP{{IP: "10.1.0.5"}}, QOSClass: v1.PodQOSBestEffort,
				ObservedGeneration: 3, NominatedNodeName: "n1",
				ResourceClaimStatuses: []v1.PodResourceClaimStatus{{Name: "c"}}},
			local: v1.PodStatus{StartTime: &tNew, HostIP: "10.0.0.1", HostIPs: []v1.HostIP{{IP: "10.0.0.1"}}, ObservedGeneration: 2},
			check: func(t *testing.T, got v1.PodStatus) {
				if !got.StartTime.Equal(&tOld) || got.PodIP != "10.1.0.5" || len(got.PodIPs) != 1 || got.QOSClass != v1.PodQOSBestEffort ||
					got.ObservedGeneration != 3 || got.NominatedNodeName != "n1" || len(got.ResourceClaimStatuses) != 1 {
					t.Fatalf("status = %+v", got)
				}
			},
		},
		{
			desc: "a terminal phase turns readiness False",
			api:  v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, tOld)}},
			local: v1.PodStatus{Phase: v1.PodSucceeded, Conditions: []v1.PodCondition{
				cond(v1.PodReady, v1.ConditionTrue, tOld), cond(v1.ContainersReady, v1.ConditionTrue, tOld)}},
			check: func(t *testing.T, got v1.PodStatus) {
				for _, ct := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady} {
					c := findCondition(got.Conditions, ct)
					if c == nil || c.Status != v1.ConditionFalse || c.Reason != PodCompleted || !c.LastTransitionTime.Equal(&tNow) {
						t.Errorf("%s = %+v", ct, c)
					}
				}
			},
		},
		{
			desc:  "termination messages are cut to the pod's budget",
			api:   v1.PodStatus{},
			local: v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{Message: strings.Repeat("x", 20000)}}}}},
			check: func(t *testing.T, got v1.PodStatus) {
				if n := len(got.ContainerStatuses[0].State.Terminated.Message); n != maxPodTerminationMessageLength {
					t.Fatalf("message length = %d", n)
				}
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			policy := tc.policy
			if policy == "" {
				policy = v1.RestartPolicyAlways
			}
			api := *tc.api.DeepCopy()
			got := mergePodStatus(mergePod(policy), tc.api, tc.local, tNow, false, kubecontainer.RestartRules{})
			if !apiequality.Semantic.DeepEqual(api, tc.api) {
				t.Fatal("mergePodStatus modified the API status")
			}
			tc.check(t, got)
		})
	}
}

func TestStatusPatch(t *testing.T) {
	t.Parallel()
	base := v1.PodStatus{Phase: v1.PodRunning, StartTime: &tOld, Conditions: []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, tOld)}}
	nanos := *base.DeepCopy()
	nanos.StartTime = &metav1.Time{Time: tOld.Add(300 * time.Millisecond)}
	changed := *base.DeepCopy()
	changed.Phase = v1.PodSucceeded
	for _, tc := range []struct {
		desc          string
		cur           v1.PodStatus
		wantUnchanged bool
		wantContains  string
	}{
		{desc: "same status", cur: base, wantUnchanged: true, wantContains: `"uid":"u1"`},
		{desc: "sub-second differences do not count (the API keeps seconds)", cur: nanos, wantUnchanged: true},
		{desc: "phase change", cur: changed, wantContains: `"phase":"Succeeded"`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			patch, unchanged, err := statusPatch("u1", base, tc.cur)
			if err != nil {
				t.Fatal(err)
			}
			if unchanged != tc.wantUnchanged || !strings.Contains(string(patch), tc.wantContains) {
				t.Fatalf("patch %s unchanged=%v", patch, unchanged)
			}
			if !strings.Contains(string(patch), `"metadata":{"uid":"u1"}`) {
				t.Errorf("patch %s lacks the UID precondition", patch)
			}
		})
	}
}
