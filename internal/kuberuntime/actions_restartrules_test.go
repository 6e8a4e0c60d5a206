package kuberuntime

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// setRestart gives c its own restartPolicy and restart rules.
func setRestart(c *v1.Container, policy v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) {
	c.RestartPolicy = &policy
	c.RestartPolicyRules = rules
}

// restartOn is a rule restarting the container on the exit codes (In) or on
// any other (NotIn).
func restartOn(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{
		Action:    v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes},
	}
}

// restartCase is one plan for a pod with containers a and b (regular) or, when
// init, with init containers i0 and i1 and the container c.
type restartCase struct {
	desc     string
	init     bool
	podOnly  bool // ContainerRestartRules off
	noAll    bool // RestartAllContainersOnContainerExits off
	policy   v1.RestartPolicy
	mutate   func(pod *v1.Pod)
	status   func(pod *v1.Pod) *kubecontainer.PodStatus
	liveness string // the container ID whose liveness probe failed
	want     plan
}

func TestComputePodActionsContainerRestartPolicy(t *testing.T) {
	t.Parallel()
	running, exited := kubecontainer.StateRunning, kubecontainer.StateExited
	sb := []*runtimeapi.PodSandboxStatus{readySandbox(0)}
	deadSandbox := []*runtimeapi.PodSandboxStatus{sandboxStatus(0, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, runtimeapi.NamespaceMode_POD, "10.1.0.2")}
	a := func(p v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) func(*v1.Pod) {
		return func(pod *v1.Pod) { setRestart(&pod.Spec.Containers[0], p, rules...) }
	}
	both := func(sandboxes []*runtimeapi.PodSandboxStatus, sa kubecontainer.State, ca int, sbState kubecontainer.State, cb int) func(*v1.Pod) *kubecontainer.PodStatus {
		return func(pod *v1.Pod) *kubecontainer.PodStatus {
			c := pod.Spec.Containers
			return podStatusOf(pod, sandboxes, cstatus(&c[0], sa, ca), cstatus(&c[1], sbState, cb))
		}
	}
	idle := plan{SandboxID: "sandbox-0", Kill: noKill()}
	startA := plan{SandboxID: "sandbox-0", Start: []int{0}, Kill: noKill()}
	killPod := plan{KillPod: true, SandboxID: "sandbox-0", Kill: noKill()}
	tests := []restartCase{
		{desc: "pod Never, container OnFailure failed: restarted", policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyOnFailure), status: both(sb, exited, 1, running, 0), want: startA},
		{desc: "pod Never, container OnFailure failed, the other done: restarted, pod kept", policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyOnFailure), status: both(sb, exited, 1, exited, 0), want: startA},
		{desc: "pod Never, container OnFailure succeeded, the other done: kill the pod", policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyOnFailure), status: both(sb, exited, 0, exited, 0), want: killPod},
		{desc: "pod Always, container Never exited: not restarted", policy: v1.RestartPolicyAlways,
			mutate: a(v1.ContainerRestartPolicyNever), status: both(sb, exited, 0, running, 0), want: idle},
		{desc: "pod Always, every container Never and done: kill the pod", policy: v1.RestartPolicyAlways,
			mutate: func(pod *v1.Pod) {
				setRestart(&pod.Spec.Containers[0], v1.ContainerRestartPolicyNever)
				setRestart(&pod.Spec.Containers[1], v1.ContainerRestartPolicyNever)
			},
			status: both(sb, exited, 1, exited, 0), want: killPod},
		{desc: "pod OnFailure, container Always succeeded: restarted", policy: v1.RestartPolicyOnFailure,
			mutate: a(v1.ContainerRestartPolicyAlways), status: both(sb, exited, 0, running, 0), want: startA},
		{desc: "rule In matches: restarted despite Never", policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyNever, restartOn(v1.ContainerRestartRuleOnExitCodesOpIn, 42)),
			status: both(sb, exited, 42, running, 0), want: startA},
		{desc: "rule In does not match: the container's Never", policy: v1.RestartPolicyAlways,
			mutate: a(v1.ContainerRestartPolicyNever, restartOn(v1.ContainerRestartRuleOnExitCodesOpIn, 42)),
			status: both(sb, exited, 1, running, 0), want: idle},
		{desc: "rule NotIn matches another code: restarted", policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyNever, restartOn(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)),
			status: both(sb, exited, 3, running, 0), want: startA},
		{desc: "rule NotIn on a listed code: the container's Never", policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyNever, restartOn(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0)),
			status: both(sb, exited, 0, running, 0), want: idle},
		{desc: "RestartAllContainers rule, the pod not marked restarting yet: restarted as by a Restart rule", policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyNever, restartAllOn(5)), status: both(sb, exited, 5, running, 0), want: startA},
		{desc: "RestartAllContainers gate off: the rule is passed over, the container's Never", noAll: true, policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyNever, restartAllOn(5)), status: both(sb, exited, 5, running, 0), want: idle},
		{desc: "liveness failed, pod Never, container OnFailure: kill and restart", policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyOnFailure), status: both(sb, running, 0, running, 0), liveness: "a-id",
			want: plan{SandboxID: "sandbox-0", Start: []int{0}, Kill: map[string]string{"a-id": "Container a failed liveness probe, will be restarted"}}},
		{desc: "liveness failed, pod Always, container Never: kill only", policy: v1.RestartPolicyAlways,
			mutate: a(v1.ContainerRestartPolicyNever), status: both(sb, running, 0, running, 0), liveness: "a-id",
			want: plan{SandboxID: "sandbox-0", Kill: map[string]string{"a-id": "Container a failed liveness probe"}}},
		{desc: "pod deleted: a container that would restart stays down", policy: v1.RestartPolicyNever,
			mutate: func(pod *v1.Pod) {
				a(v1.ContainerRestartPolicyOnFailure)(pod)
				now := metav1.Now()
				pod.DeletionTimestamp = &now
			},
			status: both(sb, exited, 1, running, 0), want: idle},
		{desc: "new sandbox, pod OnFailure: a succeeded container Always starts again", policy: v1.RestartPolicyOnFailure,
			mutate: a(v1.ContainerRestartPolicyAlways), status: both(deadSandbox, exited, 0, exited, 0),
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandbox-0", Attempt: 1, Start: []int{0}, Kill: noKill()}},
		{desc: "new sandbox, pod Always: a succeeded container OnFailure is spared", policy: v1.RestartPolicyAlways,
			mutate: a(v1.ContainerRestartPolicyOnFailure), status: both(deadSandbox, exited, 0, exited, 1),
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandbox-0", Attempt: 1, Start: []int{1}, Kill: noKill()}},
		{desc: "new sandbox, pod Never: no new sandbox, whatever the containers' policies", policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyOnFailure), status: both(deadSandbox, exited, 1, exited, 0),
			want: plan{KillPod: true, SandboxID: "sandbox-0", Attempt: 1, Kill: noKill()}},
		{desc: "gate off: pod Never, container OnFailure failed stays down", podOnly: true, policy: v1.RestartPolicyNever,
			mutate: a(v1.ContainerRestartPolicyOnFailure), status: both(sb, exited, 1, running, 0), want: idle},
		{desc: "gate off: pod Always, container Never restarts", podOnly: true, policy: v1.RestartPolicyAlways,
			mutate: a(v1.ContainerRestartPolicyNever), status: both(sb, exited, 0, running, 0), want: startA},
		{desc: "gate off: liveness failed, container Never in pod Always: kill and restart", podOnly: true, policy: v1.RestartPolicyAlways,
			mutate: a(v1.ContainerRestartPolicyNever), status: both(sb, running, 0, running, 0), liveness: "a-id",
			want: plan{SandboxID: "sandbox-0", Start: []int{0}, Kill: map[string]string{"a-id": "Container a failed liveness probe, will be restarted"}}},
	}
	runRestartCases(t, append(tests, initRestartCases()...))
}

// initRestartCases are the regular init containers' own restart policies.
func initRestartCases() []restartCase {
	exited, unknown := kubecontainer.StateExited, kubecontainer.StateUnknown
	sb := []*runtimeapi.PodSandboxStatus{readySandbox(0)}
	i0 := func(p v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) func(*v1.Pod) {
		return func(pod *v1.Pod) { setRestart(&pod.Spec.InitContainers[0], p, rules...) }
	}
	first := func(state kubecontainer.State, code int) func(*v1.Pod) *kubecontainer.PodStatus {
		return func(pod *v1.Pod) *kubecontainer.PodStatus {
			return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], state, code))
		}
	}
	retry := plan{SandboxID: "sandbox-0", Init: []int{0}, Kill: noKill()}
	killPod := plan{KillPod: true, SandboxID: "sandbox-0", Kill: noKill()}
	return []restartCase{
		{desc: "init: pod Never, OnFailure init container failed: retried", init: true, policy: v1.RestartPolicyNever,
			mutate: i0(v1.ContainerRestartPolicyOnFailure), status: first(exited, 1), want: retry},
		{desc: "init: pod Never, OnFailure init container done: the next one", init: true, policy: v1.RestartPolicyNever,
			mutate: i0(v1.ContainerRestartPolicyOnFailure), status: first(exited, 0),
			want: plan{SandboxID: "sandbox-0", Init: []int{1}, Kill: noKill()}},
		{desc: "init: pod Always, Never init container failed: kill the pod", init: true, policy: v1.RestartPolicyAlways,
			mutate: i0(v1.ContainerRestartPolicyNever), status: first(exited, 1), want: killPod},
		{desc: "init: rule matches: retried despite Never", init: true, policy: v1.RestartPolicyNever,
			mutate: i0(v1.ContainerRestartPolicyNever, restartOn(v1.ContainerRestartRuleOnExitCodesOpIn, 42)),
			status: first(exited, 42), want: retry},
		{desc: "init: unknown state, OnFailure in pod Never: killed and retried", init: true, policy: v1.RestartPolicyNever,
			mutate: i0(v1.ContainerRestartPolicyOnFailure), status: first(unknown, 0),
			want: plan{SandboxID: "sandbox-0", Init: []int{0},
				Kill: map[string]string{"i0-id": `Init container is in "unknown" state, try killing it before restart`}}},
		{desc: "init: unknown state, Never in pod Always: kill the pod", init: true, policy: v1.RestartPolicyAlways,
			mutate: i0(v1.ContainerRestartPolicyNever), status: first(unknown, 0), want: killPod},
		{desc: "init: gate off: pod Never, OnFailure init container failed: kill the pod", init: true, podOnly: true,
			policy: v1.RestartPolicyNever, mutate: i0(v1.ContainerRestartPolicyOnFailure), status: first(exited, 1), want: killPod},
		{desc: "init: gate off: pod Always, Never init container failed: retried", init: true, podOnly: true,
			policy: v1.RestartPolicyAlways, mutate: i0(v1.ContainerRestartPolicyNever), status: first(exited, 1), want: retry},
	}
}

func runRestartCases(t *testing.T, tests []restartCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := testPod("a", "b")
			if tc.init {
				pod = initPod(tc.policy)
			}
			pod.Spec.RestartPolicy = tc.policy
			tc.mutate(pod)
			env := newTestEnv(t, func(o *Options) {
				o.RestartRules = kubecontainer.RestartRules{PodPolicyOnly: tc.podOnly, NoRestartAll: tc.noAll}
			})
			if tc.liveness != "" {
				env.m.probeResults = &fakeProbes{liveness: map[string]bool{tc.liveness: true}}
			}
			got := planOf(env.m.computePodActions(pod, tc.status(pod), false))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("computePodActions:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
