package apistatus

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func csRunning(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func csStartedRunning(name string) v1.ContainerStatus {
	s := csRunning(name)
	s.Started = ptr(true)
	return s
}

func csTerminated(name string, code int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code}}}
}

func csWaiting(name string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
}

func csWaitingAfter(name string, code int32) v1.ContainerStatus {
	s := csWaiting(name)
	s.LastTerminationState.Terminated = &v1.ContainerStateTerminated{ExitCode: code}
	return s
}

func phasePod(policy v1.RestartPolicy, init []v1.Container, names ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Spec: v1.PodSpec{RestartPolicy: policy, InitContainers: init}}
	for _, n := range names {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n})
	}
	return p
}

func TestGetPhase(t *testing.T) {
	t.Parallel()
	always := v1.ContainerRestartPolicyAlways
	never := v1.ContainerRestartPolicyNever
	onFailure := v1.ContainerRestartPolicyOnFailure
	sidecar := []v1.Container{{Name: "s", RestartPolicy: &always}}
	regularInit := []v1.Container{{Name: "i"}}
	onFailureInit := []v1.Container{{Name: "i", RestartPolicy: &onFailure}}
	bOnFailure := func(p *v1.Pod) { p.Spec.Containers[1].RestartPolicy = &onFailure }
	bRestartOn42 := func(p *v1.Pod) {
		p.Spec.Containers[1].RestartPolicy = &never
		p.Spec.Containers[1].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	}
	for _, tc := range []struct {
		desc        string
		policy      v1.RestartPolicy
		init        []v1.Container
		statuses    []v1.ContainerStatus
		terminal    bool
		initialized bool
		static      bool
		podOnly     bool // ContainerRestartRules off
		mod         func(*v1.Pod)
		want        v1.PodPhase
	}{
		{desc: "no statuses", policy: v1.RestartPolicyAlways, want: v1.PodPending},
		{desc: "all running", policy: v1.RestartPolicyAlways, statuses: []v1.ContainerStatus{csRunning("a"), csRunning("b")}, want: v1.PodRunning},
		{desc: "one unknown", policy: v1.RestartPolicyAlways, statuses: []v1.ContainerStatus{csRunning("a")}, want: v1.PodPending},
		{desc: "one waiting", policy: v1.RestartPolicyAlways, statuses: []v1.ContainerStatus{csRunning("a"), csWaiting("b")}, want: v1.PodPending},
		{desc: "waiting after a crash counts as stopped", policy: v1.RestartPolicyAlways, statuses: []v1.ContainerStatus{csRunning("a"), csWaitingAfter("b", 1)}, want: v1.PodRunning},
		{desc: "Always: all stopped is Running", policy: v1.RestartPolicyAlways, statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 1)}, want: v1.PodRunning},
		{desc: "Always: all stopped, terminal API pod: Failed", policy: v1.RestartPolicyAlways, terminal: true, mod: func(p *v1.Pod) { p.Annotations = nil },
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 1)}, want: v1.PodFailed},
		{desc: "Always: all succeeded, terminal API pod: Succeeded", policy: v1.RestartPolicyAlways, terminal: true,
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 0)}, want: v1.PodSucceeded},
		{desc: "terminal static pod keeps the restart policy rule", policy: v1.RestartPolicyAlways, terminal: true, static: true,
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 0)}, want: v1.PodRunning},
		{desc: "Never: all succeeded", policy: v1.RestartPolicyNever, statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 0)}, want: v1.PodSucceeded},
		{desc: "Never: one failed", policy: v1.RestartPolicyNever, statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 2)}, want: v1.PodFailed},
		{desc: "Never: one still running", policy: v1.RestartPolicyNever, statuses: []v1.ContainerStatus{csRunning("a"), csTerminated("b", 2)}, want: v1.PodRunning},
		{desc: "OnFailure: all succeeded", policy: v1.RestartPolicyOnFailure, statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 0)}, want: v1.PodSucceeded},
		{desc: "OnFailure: one failed restarts", policy: v1.RestartPolicyOnFailure, statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 1)}, want: v1.PodRunning},
		{desc: "OnFailure: failed then waiting restarts", policy: v1.RestartPolicyOnFailure, statuses: []v1.ContainerStatus{csTerminated("a", 0), csWaitingAfter("b", 1)}, want: v1.PodRunning},
		{desc: "container restartPolicy Never overrides Always", policy: v1.RestartPolicyAlways,
			mod:      func(p *v1.Pod) { p.Spec.Containers[1].RestartPolicy = &never },
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 1)}, want: v1.PodRunning},
		{desc: "container restartPolicy Never everywhere fails", policy: v1.RestartPolicyAlways,
			mod: func(p *v1.Pod) {
				p.Spec.Containers[0].RestartPolicy, p.Spec.Containers[1].RestartPolicy = &never, &never
			},
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 1)}, want: v1.PodFailed},
		{desc: "Never, container OnFailure failed: Running while it restarts", policy: v1.RestartPolicyNever, mod: bOnFailure,
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 1)}, want: v1.PodRunning},
		{desc: "Never, container OnFailure waiting after a failure: Running", policy: v1.RestartPolicyNever, mod: bOnFailure,
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csWaitingAfter("b", 1)}, want: v1.PodRunning},
		{desc: "Never, container OnFailure succeeded: Succeeded", policy: v1.RestartPolicyNever, mod: bOnFailure,
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 0)}, want: v1.PodSucceeded},
		{desc: "gate off: Never, container OnFailure failed: Failed", policy: v1.RestartPolicyNever, mod: bOnFailure, podOnly: true,
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 1)}, want: v1.PodFailed},
		{desc: "gate off: container Never in pod Always: Running", policy: v1.RestartPolicyAlways, podOnly: true,
			mod: func(p *v1.Pod) {
				p.Spec.Containers[0].RestartPolicy, p.Spec.Containers[1].RestartPolicy = &never, &never
			},
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 1)}, want: v1.PodRunning},
		{desc: "Never, restart rule matches: Running", policy: v1.RestartPolicyNever, mod: bRestartOn42,
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 42)}, want: v1.PodRunning},
		{desc: "Never, restart rule does not match: Failed", policy: v1.RestartPolicyNever, mod: bRestartOn42,
			statuses: []v1.ContainerStatus{csTerminated("a", 0), csTerminated("b", 1)}, want: v1.PodFailed},
		{desc: "init container OnFailure failed in pod Never: Pending while it retries", policy: v1.RestartPolicyNever, init: onFailureInit,
			statuses: []v1.ContainerStatus{csTerminated("i", 1), csWaiting("a"), csWaiting("b")}, want: v1.PodPending},
		{desc: "gate off: init container OnFailure failed in pod Never: Failed", policy: v1.RestartPolicyNever, init: onFailureInit, podOnly: true,
			statuses: []v1.ContainerStatus{csTerminated("i", 1), csWaiting("a"), csWaiting("b")}, want: v1.PodFailed},
		{desc: "init container Never failed in pod Always: Failed", policy: v1.RestartPolicyAlways,
			init:     []v1.Container{{Name: "i", RestartPolicy: &never}},
			statuses: []v1.ContainerStatus{csWaitingAfter("i", 1), csWaiting("a"), csWaiting("b")}, want: v1.PodFailed},
		{desc: "init container running", policy: v1.RestartPolicyAlways, init: regularInit, statuses: []v1.ContainerStatus{csRunning("i"), csWaiting("a"), csWaiting("b")}, want: v1.PodPending},
		{desc: "init container missing", policy: v1.RestartPolicyAlways, init: regularInit, statuses: []v1.ContainerStatus{csWaiting("a"), csWaiting("b")}, want: v1.PodPending},
		{desc: "init container failed, Never", policy: v1.RestartPolicyNever, init: regularInit, statuses: []v1.ContainerStatus{csTerminated("i", 1), csWaiting("a"), csWaiting("b")}, want: v1.PodFailed},
		{desc: "init container failed, Always retries", policy: v1.RestartPolicyAlways, init: regularInit, statuses: []v1.ContainerStatus{csTerminated("i", 1), csWaiting("a"), csWaiting("b")}, want: v1.PodPending},
		{desc: "init container waiting after failure, Never", policy: v1.RestartPolicyNever, init: regularInit, statuses: []v1.ContainerStatus{csWaitingAfter("i", 1), csWaiting("a"), csWaiting("b")}, want: v1.PodFailed},
		{desc: "init container done, containers running", policy: v1.RestartPolicyNever, init: regularInit, statuses: []v1.ContainerStatus{csTerminated("i", 0), csRunning("a"), csRunning("b")}, want: v1.PodRunning},
		{desc: "sidecar not started keeps Pending", policy: v1.RestartPolicyAlways, init: sidecar, statuses: []v1.ContainerStatus{csRunning("s"), csWaiting("a"), csWaiting("b")}, want: v1.PodPending},
		{desc: "sidecar running, not started, before init: Pending", policy: v1.RestartPolicyAlways, init: sidecar,
			statuses: []v1.ContainerStatus{csRunning("s"), csRunning("a"), csRunning("b")}, want: v1.PodPending},
		{desc: "sidecar restarting after init keeps Running", policy: v1.RestartPolicyAlways, init: sidecar, initialized: true, statuses: []v1.ContainerStatus{csRunning("s"), csRunning("a"), csRunning("b")}, want: v1.PodRunning},
		{desc: "sidecar started, containers running", policy: v1.RestartPolicyAlways, init: sidecar, statuses: []v1.ContainerStatus{csStartedRunning("s"), csRunning("a"), csRunning("b")}, want: v1.PodRunning},
		{desc: "Never: containers done, sidecar running is Running", policy: v1.RestartPolicyNever, init: sidecar, initialized: true,
			statuses: []v1.ContainerStatus{csStartedRunning("s"), csTerminated("a", 0), csTerminated("b", 0)}, want: v1.PodRunning},
		{desc: "Never: containers done, sidecar stopped is Succeeded", policy: v1.RestartPolicyNever, init: sidecar, initialized: true,
			statuses: []v1.ContainerStatus{csTerminated("s", 143), csTerminated("a", 0), csTerminated("b", 0)}, want: v1.PodSucceeded},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := phasePod(tc.policy, tc.init, "a", "b")
			if tc.static {
				pod.Annotations = map[string]string{kubecontainer.ConfigSourceAnnotationKey: kubecontainer.FileSource}
			}
			if tc.mod != nil {
				tc.mod(pod)
			}
			if got := getPhase(pod, tc.statuses, tc.terminal, tc.initialized, kubecontainer.RestartRules{PodPolicyOnly: tc.podOnly}); got != tc.want {
				t.Errorf("getPhase = %s, want %s", got, tc.want)
			}
		})
	}
}
