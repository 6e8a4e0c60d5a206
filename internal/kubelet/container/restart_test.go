package container

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func restartRule(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

// withPolicy is a container with its own restartPolicy ("" for none) and rules.
func withPolicy(p v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) *v1.Container {
	c := &v1.Container{Name: "a", RestartPolicyRules: rules}
	if p != "" {
		c.RestartPolicy = &p
	}
	return c
}

func TestShouldRestart(t *testing.T) {
	t.Parallel()
	always, onFailure, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	restart, all := v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers
	in, notIn := v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn
	for _, tc := range []struct {
		desc    string
		pod     v1.RestartPolicy
		c       *v1.Container
		code    int32
		podOnly bool
		noAll   bool
		want    bool
	}{
		{desc: "pod Always", pod: v1.RestartPolicyAlways, c: withPolicy(""), code: 0, want: true},
		{desc: "pod unset counts as Always", pod: "", c: withPolicy(""), code: 0, want: true},
		{desc: "pod OnFailure, exit 0", pod: v1.RestartPolicyOnFailure, c: withPolicy(""), code: 0, want: false},
		{desc: "pod OnFailure, exit 1", pod: v1.RestartPolicyOnFailure, c: withPolicy(""), code: 1, want: true},
		{desc: "pod Never", pod: v1.RestartPolicyNever, c: withPolicy(""), code: 1, want: false},
		{desc: "container Never overrides pod Always", pod: v1.RestartPolicyAlways, c: withPolicy(never), code: 1, want: false},
		{desc: "container OnFailure overrides pod Never, exit 1", pod: v1.RestartPolicyNever, c: withPolicy(onFailure), code: 1, want: true},
		{desc: "container OnFailure overrides pod Always, exit 0", pod: v1.RestartPolicyAlways, c: withPolicy(onFailure), code: 0, want: false},
		{desc: "container Always overrides pod Never", pod: v1.RestartPolicyNever, c: withPolicy(always), code: 0, want: true},
		{desc: "rule In matches", pod: v1.RestartPolicyNever, c: withPolicy(never, restartRule(restart, in, 42)), code: 42, want: true},
		{desc: "rule In misses: container policy", pod: v1.RestartPolicyAlways, c: withPolicy(never, restartRule(restart, in, 42)), code: 1, want: false},
		{desc: "rule NotIn matches", pod: v1.RestartPolicyNever, c: withPolicy(never, restartRule(restart, notIn, 0, 2)), code: 1, want: true},
		{desc: "rule NotIn misses", pod: v1.RestartPolicyNever, c: withPolicy(never, restartRule(restart, notIn, 0, 2)), code: 2, want: false},
		{desc: "first matching rule wins", pod: v1.RestartPolicyNever,
			c: withPolicy(never, restartRule(all, in, 3), restartRule(restart, in, 3)), code: 3, want: true},
		{desc: "RestartAllContainers rule restarts it", pod: v1.RestartPolicyNever,
			c: withPolicy(never, restartRule(all, in, 3)), code: 3, want: true},
		{desc: "RestartAllContainers gate off: the first matching rule still ends the search", pod: v1.RestartPolicyNever,
			c: withPolicy(never, restartRule(all, in, 3), restartRule(restart, in, 3)), code: 3, noAll: true, want: false},
		{desc: "RestartAllContainers gate off: the container policy decides", pod: v1.RestartPolicyAlways,
			c: withPolicy(never, restartRule(all, in, 3)), code: 3, noAll: true, want: false},
		{desc: "rule without exit codes matches nothing", pod: v1.RestartPolicyNever,
			c: withPolicy(never, v1.ContainerRestartRule{Action: restart}), code: 3, want: false},
		{desc: "rules ignored without a container policy", pod: v1.RestartPolicyNever, c: withPolicy("", restartRule(restart, in, 3)), code: 3, want: false},
		{desc: "gate off: container OnFailure ignored", pod: v1.RestartPolicyNever, c: withPolicy(onFailure), code: 1, podOnly: true, want: false},
		{desc: "gate off: rules ignored", pod: v1.RestartPolicyNever, c: withPolicy(never, restartRule(restart, in, 3)), code: 3, podOnly: true, want: false},
		{desc: "gate off: container Never ignored", pod: v1.RestartPolicyAlways, c: withPolicy(never), code: 1, podOnly: true, want: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := RestartRules{PodPolicyOnly: tc.podOnly, NoRestartAll: tc.noAll}
			if got := r.ShouldRestart(tc.c, &v1.PodSpec{RestartPolicy: tc.pod}, tc.code); got != tc.want {
				t.Errorf("ShouldRestart = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestShouldBeRestarted(t *testing.T) {
	t.Parallel()
	exited := func(code int) *PodStatus {
		return &PodStatus{ContainerStatuses: []*ContainerStatus{{Name: "a", State: StateExited, ExitCode: code}}}
	}
	onFailure := v1.ContainerRestartPolicyOnFailure
	for _, tc := range []struct {
		desc    string
		policy  v1.RestartPolicy
		own     *v1.ContainerRestartPolicy
		status  *PodStatus
		deleted bool
		want    bool
	}{
		{desc: "never started", policy: v1.RestartPolicyNever, status: &PodStatus{}, want: true},
		{desc: "no pod status", policy: v1.RestartPolicyNever, want: true},
		{desc: "running", policy: v1.RestartPolicyAlways, status: &PodStatus{ContainerStatuses: []*ContainerStatus{{Name: "a", State: StateRunning}}}, want: false},
		{desc: "created", policy: v1.RestartPolicyNever, status: &PodStatus{ContainerStatuses: []*ContainerStatus{{Name: "a", State: StateCreated}}}, want: true},
		{desc: "unknown", policy: v1.RestartPolicyNever, status: &PodStatus{ContainerStatuses: []*ContainerStatus{{Name: "a", State: StateUnknown}}}, want: true},
		{desc: "Always exited 0", policy: v1.RestartPolicyAlways, status: exited(0), want: true},
		{desc: "OnFailure exited 0", policy: v1.RestartPolicyOnFailure, status: exited(0), want: false},
		{desc: "OnFailure exited 1", policy: v1.RestartPolicyOnFailure, status: exited(1), want: true},
		{desc: "Never exited 1", policy: v1.RestartPolicyNever, status: exited(1), want: false},
		{desc: "Never, container OnFailure exited 1", policy: v1.RestartPolicyNever, own: &onFailure, status: exited(1), want: true},
		{desc: "deleted pod", policy: v1.RestartPolicyAlways, status: exited(1), deleted: true, want: false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tc.policy, Containers: []v1.Container{{Name: "a", RestartPolicy: tc.own}}}}
			if tc.deleted {
				now := metav1.Now()
				pod.DeletionTimestamp = &now
			}
			if got := (RestartRules{}).ShouldBeRestarted(&pod.Spec.Containers[0], pod, tc.status); got != tc.want {
				t.Errorf("ShouldBeRestarted = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRestartPolicyHelpers(t *testing.T) {
	t.Parallel()
	always, onFailure, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	restartIn3 := restartRule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 3)
	for _, tc := range []struct {
		desc             string
		pod              v1.RestartPolicy
		c                *v1.Container
		podOnly          bool
		onKill, runsOnce bool
	}{
		{desc: "pod Always", pod: v1.RestartPolicyAlways, c: withPolicy(""), onKill: true},
		{desc: "pod OnFailure", pod: v1.RestartPolicyOnFailure, c: withPolicy(""), onKill: true, runsOnce: true},
		{desc: "pod Never", pod: v1.RestartPolicyNever, c: withPolicy("")},
		{desc: "container Never in pod Always", pod: v1.RestartPolicyAlways, c: withPolicy(never)},
		{desc: "container Never with a Restart rule: no exit code, no rule", pod: v1.RestartPolicyAlways, c: withPolicy(never, restartIn3)},
		{desc: "container OnFailure in pod Never", pod: v1.RestartPolicyNever, c: withPolicy(onFailure), onKill: true, runsOnce: true},
		{desc: "container Always in pod OnFailure", pod: v1.RestartPolicyOnFailure, c: withPolicy(always), onKill: true},
		{desc: "gate off: container OnFailure in pod Never", pod: v1.RestartPolicyNever, c: withPolicy(onFailure), podOnly: true},
		{desc: "gate off: container Never in pod OnFailure", pod: v1.RestartPolicyOnFailure, c: withPolicy(never), podOnly: true,
			onKill: true, runsOnce: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := RestartRules{PodPolicyOnly: tc.podOnly}
			spec := &v1.PodSpec{RestartPolicy: tc.pod, Containers: []v1.Container{*tc.c}}
			if got := r.RestartsOnKill(tc.c, spec); got != tc.onKill {
				t.Errorf("RestartsOnKill = %v, want %v", got, tc.onKill)
			}
			if got := r.RunsOnce(tc.c, spec); got != tc.runsOnce {
				t.Errorf("RunsOnce = %v, want %v", got, tc.runsOnce)
			}
		})
	}
}

func TestIsSidecar(t *testing.T) {
	t.Parallel()
	if !IsSidecar(withPolicy(v1.ContainerRestartPolicyAlways)) {
		t.Error("restartPolicy Always is a sidecar")
	}
	if IsSidecar(withPolicy(v1.ContainerRestartPolicyOnFailure)) || IsSidecar(withPolicy("")) {
		t.Error("only restartPolicy Always is a sidecar")
	}
}

func TestShouldAllContainersRestart(t *testing.T) {
	t.Parallel()
	never := v1.ContainerRestartPolicyNever
	all := restartRule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "init", RestartPolicy: &never, RestartPolicyRules: []v1.ContainerRestartRule{all}}},
		Containers:     []v1.Container{{Name: "main", RestartPolicy: &never, RestartPolicyRules: []v1.ContainerRestartRule{all}}, {Name: "other"}},
	}}
	exited := func(name string, code int) *PodStatus {
		return &PodStatus{ContainerStatuses: []*ContainerStatus{{Name: name, State: StateExited, ExitCode: code}}}
	}
	terminated := func(name string, code int32) *v1.PodStatus {
		return &v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: name,
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}}}
	}
	for _, tc := range []struct {
		desc  string
		ps    *PodStatus
		api   *v1.PodStatus
		noAll bool
		want  bool
	}{
		{desc: "nothing exited", want: false},
		{desc: "regular container exited with a matching code", ps: exited("main", 42), want: true},
		{desc: "init container exited with a matching code", ps: exited("init", 42), want: true},
		{desc: "exit code does not match", ps: exited("main", 1), want: false},
		{desc: "container without the rule", ps: exited("other", 42), want: false},
		{desc: "API status: terminated with a matching code", api: terminated("main", 42), want: true},
		{desc: "API status: condition True", api: &v1.PodStatus{Conditions: []v1.PodCondition{
			{Type: v1.AllContainersRestarting, Status: v1.ConditionTrue}}}, want: true},
		{desc: "API status: condition False", api: &v1.PodStatus{Conditions: []v1.PodCondition{
			{Type: v1.AllContainersRestarting, Status: v1.ConditionFalse}}}, want: false},
		{desc: "gate off", ps: exited("main", 42), noAll: true, want: false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			r := RestartRules{NoRestartAll: tc.noAll}
			if got := r.ShouldAllContainersRestart(pod, tc.ps, tc.api); got != tc.want {
				t.Errorf("ShouldAllContainersRestart = %v, want %v", got, tc.want)
			}
		})
	}
	if !AllContainersCouldRestart(&pod.Spec) || AllContainersCouldRestart(&v1.PodSpec{Containers: []v1.Container{{Name: "x"}}}) {
		t.Error("AllContainersCouldRestart: want true only for a pod with a RestartAllContainers rule")
	}
	if AllContainersRestartCleanedUp(pod, exited("init", 0)) || !AllContainersRestartCleanedUp(pod, &PodStatus{}) {
		t.Error("AllContainersRestartCleanedUp: want true only when no container of the pod is left")
	}
}
