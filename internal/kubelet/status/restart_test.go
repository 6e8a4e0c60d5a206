package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// restartSpec has the init container i and the container a, each with its
// own restartPolicy when set ("" for none).
func restartSpec(pod v1.RestartPolicy, initPolicy, policy v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) *v1.PodSpec {
	own := func(p v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy {
		if p == "" {
			return nil
		}
		return &p
	}
	return &v1.PodSpec{
		RestartPolicy:  pod,
		InitContainers: []v1.Container{{Name: "i", RestartPolicy: own(initPolicy)}},
		Containers:     []v1.Container{{Name: "a", RestartPolicy: own(policy), RestartPolicyRules: rules}},
	}
}

func TestCheckContainerStateTransitionRestartRules(t *testing.T) {
	t.Parallel()
	always, onFailure, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	restartOn42 := v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}
	restartAll42 := v1.ContainerRestartRule{Action: v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}
	for _, tc := range []struct {
		desc    string
		spec    *v1.PodSpec
		init    bool // the transition is of the init container i, else of a
		code    int32
		podOnly bool
		noAll   bool
		wantErr bool
	}{
		{desc: "pod Never, container OnFailure failed: may run again", spec: restartSpec(v1.RestartPolicyNever, "", onFailure), code: 1},
		{desc: "pod Never, container OnFailure succeeded: stays terminated", spec: restartSpec(v1.RestartPolicyNever, "", onFailure), wantErr: true},
		{desc: "pod Never, container Always: may run again", spec: restartSpec(v1.RestartPolicyNever, "", always)},
		{desc: "pod OnFailure, container Never failed: the pod's policy still allows it",
			spec: restartSpec(v1.RestartPolicyOnFailure, "", never), code: 1},
		{desc: "pod Never, rule matches: may run again", spec: restartSpec(v1.RestartPolicyNever, "", never, restartOn42), code: 42},
		{desc: "pod Never, rule misses: stays terminated", spec: restartSpec(v1.RestartPolicyNever, "", never, restartOn42), code: 1, wantErr: true},
		{desc: "gate off: container OnFailure ignored", spec: restartSpec(v1.RestartPolicyNever, "", onFailure), code: 1, podOnly: true, wantErr: true},
		{desc: "init: pod Never, OnFailure failed: may run again", spec: restartSpec(v1.RestartPolicyNever, onFailure, ""), init: true, code: 1},
		{desc: "init: pod Never, Never failed: stays terminated", spec: restartSpec(v1.RestartPolicyNever, never, ""), init: true, code: 1, wantErr: true},
		{desc: "init: sidecar may always run again", spec: restartSpec(v1.RestartPolicyNever, always, ""), init: true},
		{desc: "init: gate off: OnFailure ignored", spec: restartSpec(v1.RestartPolicyNever, onFailure, ""), init: true, code: 1,
			podOnly: true, wantErr: true},
		{desc: "RestartAllContainers rule: a succeeded container may run again", spec: restartSpec(v1.RestartPolicyNever, "", never, restartAll42)},
		{desc: "RestartAllContainers rule: a succeeded init container may run again", spec: restartSpec(v1.RestartPolicyNever, "", never, restartAll42),
			init: true},
		{desc: "RestartAllContainers gate off: stays terminated", spec: restartSpec(v1.RestartPolicyNever, "", never, restartAll42),
			noAll: true, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			old, cur := &v1.PodStatus{}, &v1.PodStatus{}
			if tc.init {
				old.InitContainerStatuses = []v1.ContainerStatus{terminated("i", tc.code)}
				cur.InitContainerStatuses = []v1.ContainerStatus{running("i", "x://2")}
			} else {
				old.ContainerStatuses = []v1.ContainerStatus{terminated("a", tc.code)}
				cur.ContainerStatuses = []v1.ContainerStatus{running("a", "x://2")}
			}
			err := checkContainerStateTransition(old, cur, tc.spec, kubecontainer.RestartRules{PodPolicyOnly: tc.podOnly, NoRestartAll: tc.noAll})
			if (err != nil) != tc.wantErr {
				t.Errorf("checkContainerStateTransition = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

func TestMergeKeepsTerminatedByContainerPolicy(t *testing.T) {
	t.Parallel()
	onFailure := v1.ContainerRestartPolicyOnFailure
	for _, tc := range []struct {
		desc        string
		code        int32
		podOnly     bool
		restartAll  bool // a has a RestartAllContainers rule
		noAll       bool
		wantRunning bool
	}{
		{desc: "container OnFailure failed: the new instance is reported", code: 1, wantRunning: true},
		{desc: "container OnFailure succeeded: the API's terminated state stays", code: 0},
		{desc: "gate off: the pod's Never keeps the terminated state", code: 1, podOnly: true},
		{desc: "RestartAllContainers rule: a succeeded container restarted with the pod is reported", code: 0, restartAll: true,
			wantRunning: true},
		{desc: "RestartAllContainers gate off: the API's terminated state stays", code: 0, restartAll: true, noAll: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := &v1.Pod{Spec: *restartSpec(v1.RestartPolicyNever, "", onFailure)}
			if tc.restartAll {
				pod.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
					ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
			}
			api := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(terminated("a", tc.code), "docker://1", 0)}}
			local := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(running("a", "docker://2"), "docker://2", 1)}}
			got := mergePodStatus(pod, api, local, tNow, false, kubecontainer.RestartRules{PodPolicyOnly: tc.podOnly, NoRestartAll: tc.noAll})
			if isRunning := got.ContainerStatuses[0].State.Running != nil; isRunning != tc.wantRunning {
				t.Errorf("running = %v, want %v (status %+v)", isRunning, tc.wantRunning, got.ContainerStatuses[0])
			}
		})
	}
}

// TestMergeReportsRemovedForRestartAll: a container removed to restart its
// pod in place is reported waiting (RestartingAllContainers) over the API's
// terminated state, though its status still names the removed container.
func TestMergeReportsRemovedForRestartAll(t *testing.T) {
	t.Parallel()
	never := v1.ContainerRestartPolicyNever
	pod := &v1.Pod{Spec: *restartSpec(v1.RestartPolicyNever, "", never)}
	removed := withID(terminated("a", 42), "docker://1", 1)
	removed.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ReasonRestartingAllContainers}}
	api := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{withID(terminated("a", 42), "docker://1", 0)}}
	local := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{removed}}
	got := mergePodStatus(pod, api, local, tNow, false, kubecontainer.RestartRules{})
	if cs := got.ContainerStatuses[0]; cs.State.Waiting == nil || cs.RestartCount != 1 {
		t.Errorf("merged %+v, want the local waiting status with restart count 1", cs)
	}
	got = mergePodStatus(pod, api, local, tNow, false, kubecontainer.RestartRules{NoRestartAll: true})
	if cs := got.ContainerStatuses[0]; cs.State.Terminated == nil {
		t.Errorf("gate off: merged %+v, want the API's terminated status", cs)
	}
}
