package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

func readyStatus(name string, ready bool) v1.ContainerStatus {
	cs := running(name, "")
	cs.Ready = ready
	return cs
}

func TestGenerateContainersAndPodReady(t *testing.T) {
	t.Parallel()
	always := v1.ContainerRestartPolicyAlways
	for _, tc := range []struct {
		desc       string
		sidecar    bool
		gates      []v1.PodReadinessGate
		conditions []v1.PodCondition
		statuses   []v1.ContainerStatus
		phase      v1.PodPhase
		wantCR     v1.ConditionStatus
		wantReason string
		wantReady  v1.ConditionStatus
	}{
		{desc: "nil statuses", statuses: nil, phase: v1.PodPending, wantCR: v1.ConditionFalse, wantReason: UnknownContainerStatuses, wantReady: v1.ConditionFalse},
		{desc: "all ready", statuses: []v1.ContainerStatus{readyStatus("a", true), readyStatus("b", true)}, phase: v1.PodRunning, wantCR: v1.ConditionTrue, wantReady: v1.ConditionTrue},
		{desc: "one unready", statuses: []v1.ContainerStatus{readyStatus("a", true), readyStatus("b", false)}, phase: v1.PodRunning, wantCR: v1.ConditionFalse, wantReason: ContainersNotReady, wantReady: v1.ConditionFalse},
		{desc: "one unknown", statuses: []v1.ContainerStatus{readyStatus("a", true)}, phase: v1.PodRunning, wantCR: v1.ConditionFalse, wantReason: ContainersNotReady, wantReady: v1.ConditionFalse},
		{desc: "succeeded", statuses: []v1.ContainerStatus{terminated("a", 0), terminated("b", 0)}, phase: v1.PodSucceeded, wantCR: v1.ConditionFalse, wantReason: PodCompleted, wantReady: v1.ConditionFalse},
		{desc: "failed", statuses: []v1.ContainerStatus{readyStatus("a", true), readyStatus("b", true)}, phase: v1.PodFailed, wantCR: v1.ConditionFalse, wantReason: PodFailed, wantReady: v1.ConditionFalse},
		{desc: "sidecar unready", sidecar: true, statuses: []v1.ContainerStatus{readyStatus("s", false), readyStatus("a", true), readyStatus("b", true)}, phase: v1.PodRunning, wantCR: v1.ConditionFalse, wantReason: ContainersNotReady, wantReady: v1.ConditionFalse},
		{desc: "readiness gate missing", gates: []v1.PodReadinessGate{{ConditionType: "x"}}, statuses: []v1.ContainerStatus{readyStatus("a", true), readyStatus("b", true)}, phase: v1.PodRunning, wantCR: v1.ConditionTrue, wantReady: v1.ConditionFalse},
		{desc: "readiness gate false", gates: []v1.PodReadinessGate{{ConditionType: "x"}}, conditions: []v1.PodCondition{{Type: "x", Status: v1.ConditionFalse}}, statuses: []v1.ContainerStatus{readyStatus("a", true), readyStatus("b", true)}, phase: v1.PodRunning, wantCR: v1.ConditionTrue, wantReady: v1.ConditionFalse},
		{desc: "readiness gate true", gates: []v1.PodReadinessGate{{ConditionType: "x"}}, conditions: []v1.PodCondition{{Type: "x", Status: v1.ConditionTrue}}, statuses: []v1.ContainerStatus{readyStatus("a", true), readyStatus("b", true)}, phase: v1.PodRunning, wantCR: v1.ConditionTrue, wantReady: v1.ConditionTrue},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := testPod(v1.RestartPolicyAlways, true)
			pod.Spec.ReadinessGates = tc.gates
			if tc.sidecar {
				pod.Spec.InitContainers = []v1.Container{{Name: "s", RestartPolicy: &always}}
			}
			cr := GenerateContainersReadyCondition(pod, tc.statuses, tc.phase)
			if cr.Status != tc.wantCR || cr.Reason != tc.wantReason {
				t.Errorf("ContainersReady = %s/%s (%s), want %s/%s", cr.Status, cr.Reason, cr.Message, tc.wantCR, tc.wantReason)
			}
			r := GeneratePodReadyCondition(pod, tc.conditions, tc.statuses, tc.phase)
			if r.Status != tc.wantReady {
				t.Errorf("Ready = %s (%s: %s), want %s", r.Status, r.Reason, r.Message, tc.wantReady)
			}
		})
	}
}

func TestGeneratePodInitializedCondition(t *testing.T) {
	t.Parallel()
	always := v1.ContainerRestartPolicyAlways
	started := true
	doneInit := terminated("i", 0)
	doneInit.Ready = true
	startedSidecar := running("s", "")
	startedSidecar.Started = &started
	for _, tc := range []struct {
		desc     string
		init     []v1.Container
		statuses []v1.ContainerStatus
		phase    v1.PodPhase
		was      bool // initialized before, RestartAllContainers on
		want     v1.ConditionStatus
		reason   string
	}{
		{desc: "no init containers", want: v1.ConditionTrue, statuses: []v1.ContainerStatus{}},
		{desc: "unknown statuses", init: []v1.Container{{Name: "i"}}, want: v1.ConditionFalse, reason: UnknownContainerStatuses},
		{desc: "init running", init: []v1.Container{{Name: "i"}}, statuses: []v1.ContainerStatus{running("i", "")}, want: v1.ConditionFalse, reason: ContainersNotInitialized},
		{desc: "init done", init: []v1.Container{{Name: "i"}}, statuses: []v1.ContainerStatus{doneInit}, want: v1.ConditionTrue},
		{desc: "sidecar not started", init: []v1.Container{{Name: "s", RestartPolicy: &always}}, statuses: []v1.ContainerStatus{running("s", "")}, want: v1.ConditionFalse, reason: ContainersNotInitialized},
		{desc: "sidecar started", init: []v1.Container{{Name: "s", RestartPolicy: &always}}, statuses: []v1.ContainerStatus{startedSidecar}, want: v1.ConditionTrue},
		{desc: "regular container started means initialized", init: []v1.Container{{Name: "i"}}, statuses: []v1.ContainerStatus{running("i", ""), running("a", "")}, want: v1.ConditionTrue},
		{desc: "succeeded", init: []v1.Container{{Name: "i"}}, statuses: []v1.ContainerStatus{terminated("i", 0)}, phase: v1.PodSucceeded, want: v1.ConditionTrue, reason: PodCompleted},
		{desc: "init running again after RestartAllContainers: stays initialized", init: []v1.Container{{Name: "i"}},
			statuses: []v1.ContainerStatus{running("i", "")}, was: true, want: v1.ConditionTrue},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := testPod(v1.RestartPolicyAlways, true)
			pod.Spec.InitContainers = tc.init
			c := GeneratePodInitializedCondition(pod, tc.statuses, tc.phase, tc.was)
			if c.Status != tc.want || c.Reason != tc.reason {
				t.Errorf("Initialized = %s/%s (%s), want %s/%s", c.Status, c.Reason, c.Message, tc.want, tc.reason)
			}
		})
	}
}

func sandbox(state runtimeapi.PodSandboxState, ip string, hostNet bool) *runtimeapi.PodSandboxStatus {
	mode := runtimeapi.NamespaceMode_POD
	if hostNet {
		mode = runtimeapi.NamespaceMode_NODE
	}
	return &runtimeapi.PodSandboxStatus{
		State:   state,
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
		Linux:   &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{Network: mode}}},
	}
}

func TestGeneratePodReadyToStartContainersCondition(t *testing.T) {
	t.Parallel()
	ready, notReady := runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	for _, tc := range []struct {
		desc      string
		hostNet   bool
		sandboxes []*runtimeapi.PodSandboxStatus
		want      v1.ConditionStatus
	}{
		{desc: "no sandbox", want: v1.ConditionFalse},
		{desc: "ready with IP", sandboxes: []*runtimeapi.PodSandboxStatus{sandbox(ready, "10.0.0.2", false)}, want: v1.ConditionTrue},
		{desc: "ready without IP", sandboxes: []*runtimeapi.PodSandboxStatus{sandbox(ready, "", false)}, want: v1.ConditionFalse},
		{desc: "host network without IP", hostNet: true, sandboxes: []*runtimeapi.PodSandboxStatus{sandbox(ready, "", true)}, want: v1.ConditionTrue},
		{desc: "network mode changed", hostNet: true, sandboxes: []*runtimeapi.PodSandboxStatus{sandbox(ready, "10.0.0.2", false)}, want: v1.ConditionFalse},
		{desc: "newest not ready", sandboxes: []*runtimeapi.PodSandboxStatus{sandbox(notReady, "10.0.0.2", false), sandbox(ready, "10.0.0.3", false)}, want: v1.ConditionFalse},
		{desc: "two ready", sandboxes: []*runtimeapi.PodSandboxStatus{sandbox(ready, "10.0.0.2", false), sandbox(ready, "10.0.0.3", false)}, want: v1.ConditionFalse},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := testPod(v1.RestartPolicyAlways, true)
			pod.Spec.HostNetwork = tc.hostNet
			c := GeneratePodReadyToStartContainersCondition(pod, &kubecontainer.PodStatus{SandboxStatuses: tc.sandboxes})
			if c.Status != tc.want || c.Type != v1.PodReadyToStartContainers {
				t.Errorf("condition = %+v, want %s", c, tc.want)
			}
		})
	}
}

func TestGeneratePodReadyGateMessages(t *testing.T) {
	t.Parallel()
	pod := testPod(v1.RestartPolicyAlways, false)
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "k8s.io/one"}, {ConditionType: "k8s.io/two"}}
	statuses := []v1.ContainerStatus{readyStatus("a", true), readyStatus("b", true)}
	conds := []v1.PodCondition{{Type: "k8s.io/one", Status: v1.ConditionFalse}}
	r := GeneratePodReadyCondition(pod, conds, statuses, v1.PodRunning)
	want := `the status of pod readiness gate "k8s.io/one" is not "True", but False, ` +
		`corresponding condition of pod readiness gate "k8s.io/two" does not exist.`
	if r.Status != v1.ConditionFalse || r.Reason != ReadinessGatesNotReady || r.Message != want {
		t.Errorf("Ready = %s/%s %q, want False/%s %q", r.Status, r.Reason, r.Message, ReadinessGatesNotReady, want)
	}
}

func TestReadinessNeedsReconcile(t *testing.T) {
	t.Parallel()
	gates := []v1.PodReadinessGate{{ConditionType: "k8s.io/one"}, {ConditionType: "k8s.io/two"}}
	bothTrue := []v1.PodCondition{{Type: "k8s.io/one", Status: v1.ConditionTrue}, {Type: "k8s.io/two", Status: v1.ConditionTrue}}
	oneMissing := `corresponding condition of pod readiness gate "k8s.io/two" does not exist.`
	ready := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionTrue}
	notReady := func(msg string) v1.PodCondition {
		return v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: ReadinessGatesNotReady, Message: msg}
	}
	allReady := []v1.ContainerStatus{readyStatus("a", true), readyStatus("b", true)}
	for _, tc := range []struct {
		desc     string
		gates    []v1.PodReadinessGate
		conds    []v1.PodCondition
		statuses []v1.ContainerStatus
		want     bool
	}{
		{desc: "no readiness gates", conds: []v1.PodCondition{notReady("")}, statuses: allReady},
		{desc: "no Ready condition yet", gates: gates, conds: bothTrue[:1], statuses: allReady},
		{desc: "gates set true, Ready still false", gates: gates, want: true, statuses: allReady,
			conds: append(append([]v1.PodCondition{}, bothTrue...), notReady(oneMissing))},
		{desc: "Ready true and gates true", gates: gates, statuses: allReady,
			conds: append(append([]v1.PodCondition{}, bothTrue...), ready)},
		{desc: "a gate turned false, Ready still true", gates: gates, want: true, statuses: allReady,
			conds: []v1.PodCondition{{Type: "k8s.io/one", Status: v1.ConditionFalse}, bothTrue[1], ready}},
		{desc: "the same status, another message", gates: gates, want: true, statuses: allReady,
			conds: []v1.PodCondition{bothTrue[0], notReady("stale message")}},
		{desc: "the same status and message", gates: gates, statuses: allReady,
			conds: []v1.PodCondition{bothTrue[0], notReady(oneMissing)}},
		{desc: "containers not ready: the gates do not matter", gates: gates,
			statuses: []v1.ContainerStatus{readyStatus("a", true), readyStatus("b", false)},
			conds: append(append([]v1.PodCondition{}, bothTrue...), v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse,
				Reason: ContainersNotReady, Message: "containers with unready status: [b]"})},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := testPod(v1.RestartPolicyAlways, false)
			pod.Spec.ReadinessGates = tc.gates
			pod.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: tc.conds, ContainerStatuses: tc.statuses}
			if got := ReadinessNeedsReconcile(pod); got != tc.want {
				t.Errorf("ReadinessNeedsReconcile = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReadinessNeedsReconcileCountsSidecars(t *testing.T) {
	t.Parallel()
	always := v1.ContainerRestartPolicyAlways
	pod := testPod(v1.RestartPolicyAlways, false)
	pod.Spec.InitContainers = []v1.Container{{Name: "s", RestartPolicy: &always}}
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "k8s.io/one"}}
	pod.Status = v1.PodStatus{
		Phase:                 v1.PodRunning,
		Conditions:            []v1.PodCondition{{Type: "k8s.io/one", Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: v1.ConditionTrue}},
		InitContainerStatuses: []v1.ContainerStatus{readyStatus("s", true)},
		ContainerStatuses:     []v1.ContainerStatus{readyStatus("a", true), readyStatus("b", true)},
	}
	if ReadinessNeedsReconcile(pod) {
		t.Error("a ready pod with a ready sidecar needs a readiness reconcile")
	}
}

func TestGenerateAllContainersRestartingCondition(t *testing.T) {
	t.Parallel()
	never := v1.ContainerRestartPolicyNever
	pod := testPod(v1.RestartPolicyNever, false)
	pod.Spec.Containers[0].RestartPolicy = &never
	pod.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	name := pod.Spec.Containers[0].Name
	exited42 := &kubecontainer.PodStatus{ContainerStatuses: []*kubecontainer.ContainerStatus{{Name: name, State: kubecontainer.StateExited, ExitCode: 42}}}
	restarting := &v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionTrue}}}
	for _, tc := range []struct {
		desc                string
		ps                  *kubecontainer.PodStatus
		old                 *v1.PodStatus
		phase               v1.PodPhase
		noAll               bool
		want                v1.ConditionStatus
		wantReason, wantMsg string
	}{
		{desc: "nothing exited", ps: &kubecontainer.PodStatus{}, old: &v1.PodStatus{}, phase: v1.PodRunning, want: v1.ConditionFalse},
		{desc: "exit matching the rule", ps: exited42, old: &v1.PodStatus{}, phase: v1.PodRunning, want: v1.ConditionTrue,
			wantReason: RestartAllContainersStarted, wantMsg: "container exited with restart policy rule"},
		{desc: "restarting, containers left", ps: &kubecontainer.PodStatus{ContainerStatuses: []*kubecontainer.ContainerStatus{
			{Name: name, State: kubecontainer.StateRunning}}}, old: restarting, phase: v1.PodRunning, want: v1.ConditionTrue,
			wantReason: RestartAllContainersStarted, wantMsg: "container exited with restart policy rule"},
		{desc: "restarting, every container removed: done", ps: &kubecontainer.PodStatus{}, old: restarting, phase: v1.PodRunning,
			want: v1.ConditionFalse},
		{desc: "succeeded", ps: exited42, old: restarting, phase: v1.PodSucceeded, want: v1.ConditionFalse, wantReason: PodCompleted},
		{desc: "failed", ps: exited42, old: restarting, phase: v1.PodFailed, want: v1.ConditionFalse, wantReason: PodFailed},
		{desc: "gate off", ps: exited42, old: restarting, phase: v1.PodRunning, noAll: true, want: v1.ConditionFalse},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := GenerateAllContainersRestartingCondition(pod, tc.ps, tc.old, tc.phase, kubecontainer.RestartRules{NoRestartAll: tc.noAll})
			if c.Type != v1.AllContainersRestarting || c.Status != tc.want || c.Reason != tc.wantReason || c.Message != tc.wantMsg {
				t.Errorf("condition %+v, want %s %q %q", c, tc.want, tc.wantReason, tc.wantMsg)
			}
		})
	}
}
