package kuberuntime

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// sandboxStatus builds a sandbox status; ip "" means no IP.
func sandboxStatus(attempt uint32, state runtimeapi.PodSandboxState, netMode runtimeapi.NamespaceMode, ip string) *runtimeapi.PodSandboxStatus {
	return &runtimeapi.PodSandboxStatus{
		Id:       "sandbox-" + string(rune('0'+attempt)),
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-1", Attempt: attempt},
		State:    state,
		Network:  &runtimeapi.PodSandboxNetworkStatus{Ip: ip},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{
			Options: &runtimeapi.NamespaceOption{Network: netMode},
		}},
	}
}

func readySandbox(attempt uint32) *runtimeapi.PodSandboxStatus {
	return sandboxStatus(attempt, runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.NamespaceMode_POD, "10.1.0.2")
}

// cstatus is the status of a container created from c's current spec.
func cstatus(c *v1.Container, state kubecontainer.State, exitCode int) *kubecontainer.ContainerStatus {
	return &kubecontainer.ContainerStatus{
		ID:       kubecontainer.ContainerID{Type: testRuntimeName, ID: c.Name + "-id"},
		Name:     c.Name,
		State:    state,
		ExitCode: exitCode,
		Hash:     hashContainer(c),
	}
}

func podStatusOf(pod *v1.Pod, sandboxes []*runtimeapi.PodSandboxStatus, containers ...*kubecontainer.ContainerStatus) *kubecontainer.PodStatus {
	return &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace, SandboxStatuses: sandboxes, ContainerStatuses: containers}
}

// plan is the comparable form of podActions: kills by container ID with
// their message.
type plan struct {
	KillPod, CreateSandbox bool
	SandboxID              string
	Attempt                uint32
	Init, Start            []int
	Kill                   map[string]string
}

func planOf(a podActions) plan {
	p := plan{KillPod: a.KillPod, CreateSandbox: a.CreateSandbox, SandboxID: a.SandboxID, Attempt: a.Attempt,
		Init: a.InitContainersToStart, Start: a.ContainersToStart, Kill: map[string]string{}}
	for id, info := range a.ContainersToKill {
		p.Kill[id.ID] = info.message
	}
	if len(p.Init) == 0 {
		p.Init = nil
	}
	if len(p.Start) == 0 {
		p.Start = nil
	}
	return p
}

func noKill() map[string]string { return map[string]string{} }

func TestComputePodActions(t *testing.T) {
	t.Parallel()
	running, exited, unknown, created := kubecontainer.StateRunning, kubecontainer.StateExited, kubecontainer.StateUnknown, kubecontainer.StateCreated
	tests := []struct {
		desc   string
		mutate func(pod *v1.Pod)
		status func(pod *v1.Pod) *kubecontainer.PodStatus
		probes *fakeProbes
		want   plan
	}{
		{
			desc:   "new pod: create the sandbox and start every container",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus { return nil },
			want:   plan{KillPod: true, CreateSandbox: true, Start: []int{0, 1}, Kill: noKill()},
		},
		{
			desc: "everything runs from the current spec: nothing to do",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], running, 0), cstatus(&c[1], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Kill: noKill()},
		},
		{
			desc: "sandbox not ready: kill, new sandbox with attempt+1, start all",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				sb := sandboxStatus(1, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, runtimeapi.NamespaceMode_POD, "10.1.0.2")
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{sb}, cstatus(&c[0], exited, 0), cstatus(&c[1], exited, 1))
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandbox-1", Attempt: 2, Start: []int{0, 1}, Kill: noKill()},
		},
		{
			desc: "sandbox without IP on the pod network: recreate",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				sb := sandboxStatus(0, runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.NamespaceMode_POD, "")
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{sb})
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandbox-0", Attempt: 1, Start: []int{0, 1}, Kill: noKill()},
		},
		{
			desc:   "hostNetwork toggled on: the network namespace changed, recreate",
			mutate: func(pod *v1.Pod) { pod.Spec.HostNetwork = true },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], running, 0), cstatus(&c[1], running, 0))
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandbox-0", Attempt: 1, Start: []int{0, 1}, Kill: noKill()},
		},
		{
			desc:   "host network sandbox without IP is fine",
			mutate: func(pod *v1.Pod) { pod.Spec.HostNetwork = true },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				sb := sandboxStatus(0, runtimeapi.PodSandboxState_SANDBOX_READY, runtimeapi.NamespaceMode_NODE, "")
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{sb}, cstatus(&c[0], running, 0), cstatus(&c[1], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Kill: noKill()},
		},
		{
			desc: "two ready sandboxes: reconcile with a new one",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(1), readySandbox(0)})
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandbox-1", Attempt: 2, Start: []int{0, 1}, Kill: noKill()},
		},
		{
			desc: "restartPolicy Always: an exited container restarts whatever its exit code",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], exited, 0), cstatus(&c[1], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Start: []int{0}, Kill: noKill()},
		},
		{
			desc:   "restartPolicy OnFailure: exit 0 stays, exit 1 restarts",
			mutate: func(pod *v1.Pod) { pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], exited, 0), cstatus(&c[1], exited, 1))
			},
			want: plan{SandboxID: "sandbox-0", Start: []int{1}, Kill: noKill()},
		},
		{
			desc:   "restartPolicy Never: a failed container stays dead while another runs",
			mutate: func(pod *v1.Pod) { pod.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], exited, 1), cstatus(&c[1], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Kill: noKill()},
		},
		{
			desc:   "restartPolicy Never: all done, kill the pod",
			mutate: func(pod *v1.Pod) { pod.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], exited, 1), cstatus(&c[1], exited, 0))
			},
			want: plan{KillPod: true, SandboxID: "sandbox-0", Kill: noKill()},
		},
		{
			desc:   "completed pod with Never and a dead sandbox is not restarted",
			mutate: func(pod *v1.Pod) { pod.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				sb := sandboxStatus(0, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, runtimeapi.NamespaceMode_POD, "10.1.0.2")
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{sb}, cstatus(&c[0], exited, 0), cstatus(&c[1], exited, 0))
			},
			want: plan{KillPod: true, SandboxID: "sandbox-0", Attempt: 1, Kill: noKill()},
		},
		{
			desc:   "Never: a dead sandbox without any container is retried",
			mutate: func(pod *v1.Pod) { pod.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				sb := sandboxStatus(0, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, runtimeapi.NamespaceMode_POD, "")
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{sb})
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandbox-0", Attempt: 1, Start: []int{0, 1}, Kill: noKill()},
		},
		{
			desc:   "OnFailure: dead sandbox, every container succeeded: no new sandbox",
			mutate: func(pod *v1.Pod) { pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				sb := sandboxStatus(2, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, runtimeapi.NamespaceMode_POD, "10.1.0.2")
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{sb}, cstatus(&c[0], exited, 0), cstatus(&c[1], exited, 0))
			},
			want: plan{KillPod: true, SandboxID: "sandbox-2", Attempt: 3, Kill: noKill()},
		},
		{
			desc:   "OnFailure: dead sandbox, only the failed container starts again",
			mutate: func(pod *v1.Pod) { pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				sb := sandboxStatus(0, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, runtimeapi.NamespaceMode_POD, "10.1.0.2")
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{sb}, cstatus(&c[0], exited, 0), cstatus(&c[1], exited, 2))
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandbox-0", Attempt: 1, Start: []int{1}, Kill: noKill()},
		},
		{
			desc:   "spec changed: kill and restart even with Never",
			mutate: func(pod *v1.Pod) { pod.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				old := c[0]
				old.Image = "busybox:1.35"
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&old, running, 0), cstatus(&c[1], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Start: []int{0},
				Kill: map[string]string{"a-id": "Container a definition changed, will be restarted"}},
		},
		{
			desc: "liveness probe failed: kill and restart",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], running, 0), cstatus(&c[1], running, 0))
			},
			probes: &fakeProbes{liveness: map[string]bool{"b-id": true}},
			want: plan{SandboxID: "sandbox-0", Start: []int{1},
				Kill: map[string]string{"b-id": "Container b failed liveness probe, will be restarted"}},
		},
		{
			desc:   "liveness probe failed with Never: kill only",
			mutate: func(pod *v1.Pod) { pod.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], running, 0), cstatus(&c[1], running, 0))
			},
			probes: &fakeProbes{liveness: map[string]bool{"b-id": true}},
			want:   plan{SandboxID: "sandbox-0", Kill: map[string]string{"b-id": "Container b failed liveness probe"}},
		},
		{
			desc: "startup probe failed: kill and restart",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], running, 0), cstatus(&c[1], running, 0))
			},
			probes: &fakeProbes{startup: map[string]bool{"a-id": true}},
			want: plan{SandboxID: "sandbox-0", Start: []int{0},
				Kill: map[string]string{"a-id": "Container a failed startup probe, will be restarted"}},
		},
		{
			desc: "unknown state: kill before starting again",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], unknown, 0), cstatus(&c[1], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Start: []int{0},
				Kill: map[string]string{"a-id": `Container is in "unknown" state, try killing it before restart`}},
		},
		{
			desc:   "created but never started: start again, even with Never",
			mutate: func(pod *v1.Pod) { pod.Spec.RestartPolicy = v1.RestartPolicyNever },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], created, 0), cstatus(&c[1], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Start: []int{0}, Kill: noKill()},
		},
		{
			desc: "pod being deleted: exited containers are not restarted",
			mutate: func(pod *v1.Pod) {
				now := metav1.Now()
				pod.DeletionTimestamp = &now
			},
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(&c[0], exited, 1), cstatus(&c[1], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Kill: noKill()},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := testPod("a", "b")
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			env := newTestEnv(t)
			if tc.probes != nil {
				env.m.probeResults = tc.probes
			}
			got := planOf(env.m.computePodActions(pod, tc.status(pod), false))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("computePodActions:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// initPod has init containers i0 and i1 and the container c.
func initPod(policy v1.RestartPolicy) *v1.Pod {
	pod := testPod("c")
	pod.Spec.RestartPolicy = policy
	pod.Spec.InitContainers = []v1.Container{testContainer("i0"), testContainer("i1")}
	return pod
}

func TestComputePodActionsInitContainers(t *testing.T) {
	t.Parallel()
	running, exited, unknown, created := kubecontainer.StateRunning, kubecontainer.StateExited, kubecontainer.StateUnknown, kubecontainer.StateCreated
	sb := []*runtimeapi.PodSandboxStatus{readySandbox(0)}
	tests := []struct {
		desc   string
		policy v1.RestartPolicy
		status func(pod *v1.Pod) *kubecontainer.PodStatus
		want   plan
	}{
		{
			desc:   "new pod: sandbox and the first init container only",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus { return nil },
			want:   plan{KillPod: true, CreateSandbox: true, Init: []int{0}, Kill: noKill()},
		},
		{
			desc:   "sandbox ready, nothing ran: first init container",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus { return podStatusOf(pod, sb) },
			want:   plan{SandboxID: "sandbox-0", Init: []int{0}, Kill: noKill()},
		},
		{
			desc:   "first init container running: wait",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Kill: noKill()},
		},
		{
			desc:   "first init container done: start the second",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], exited, 0))
			},
			want: plan{SandboxID: "sandbox-0", Init: []int{1}, Kill: noKill()},
		},
		{
			desc:   "all init containers done: start the containers",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic := pod.Spec.InitContainers
				return podStatusOf(pod, sb, cstatus(&ic[1], exited, 0), cstatus(&ic[0], exited, 0))
			},
			want: plan{SandboxID: "sandbox-0", Start: []int{0}, Kill: noKill()},
		},
		{
			desc:   "last init container done, the first one garbage collected: start the containers",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[1], exited, 0))
			},
			want: plan{SandboxID: "sandbox-0", Start: []int{0}, Kill: noKill()},
		},
		{
			desc:   "init container failed with Always: run it again",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], exited, 1))
			},
			want: plan{SandboxID: "sandbox-0", Init: []int{0}, Kill: noKill()},
		},
		{
			desc:   "init container failed with OnFailure: run it again",
			policy: v1.RestartPolicyOnFailure,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic := pod.Spec.InitContainers
				return podStatusOf(pod, sb, cstatus(&ic[1], exited, 3), cstatus(&ic[0], exited, 0))
			},
			want: plan{SandboxID: "sandbox-0", Init: []int{1}, Kill: noKill()},
		},
		{
			desc:   "init container failed with Never: kill the pod",
			policy: v1.RestartPolicyNever,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], exited, 1))
			},
			want: plan{KillPod: true, SandboxID: "sandbox-0", Kill: noKill()},
		},
		{
			desc:   "init container OOM killed counts as failed",
			policy: v1.RestartPolicyNever,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				s := cstatus(&pod.Spec.InitContainers[0], exited, 0)
				s.Reason = "OOMKilled"
				return podStatusOf(pod, sb, s)
			},
			want: plan{KillPod: true, SandboxID: "sandbox-0", Kill: noKill()},
		},
		{
			desc:   "init container in unknown state: kill and run again",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], unknown, 0))
			},
			want: plan{SandboxID: "sandbox-0", Init: []int{0},
				Kill: map[string]string{"i0-id": `Init container is in "unknown" state, try killing it before restart`}},
		},
		{
			desc:   "init container created but not started: start it",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], created, 0))
			},
			want: plan{SandboxID: "sandbox-0", Init: []int{0}, Kill: noKill()},
		},
		{
			desc:   "containers run and the init containers are gone: do not rerun them",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.Containers[0], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Kill: noKill()},
		},
		{
			desc:   "new sandbox after a reboot: init containers run again",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				dead := sandboxStatus(0, runtimeapi.PodSandboxState_SANDBOX_NOTREADY, runtimeapi.NamespaceMode_POD, "10.1.0.2")
				ic := pod.Spec.InitContainers
				return podStatusOf(pod, []*runtimeapi.PodSandboxStatus{dead},
					cstatus(&pod.Spec.Containers[0], exited, 0), cstatus(&ic[1], exited, 0), cstatus(&ic[0], exited, 0))
			},
			want: plan{KillPod: true, CreateSandbox: true, SandboxID: "sandbox-0", Attempt: 1, Init: []int{0}, Kill: noKill()},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := initPod(tc.policy)
			env := newTestEnv(t)
			got := planOf(env.m.computePodActions(pod, tc.status(pod), false))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("computePodActions:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// sidecarPod has the sidecar s0 (restartPolicy Always), the init container i1
// and the container c.
func sidecarPod(policy v1.RestartPolicy) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	pod := testPod("c")
	pod.Spec.RestartPolicy = policy
	s0 := testContainer("s0")
	s0.RestartPolicy = &always
	pod.Spec.InitContainers = []v1.Container{s0, testContainer("i1")}
	return pod
}

func TestComputePodActionsSidecars(t *testing.T) {
	t.Parallel()
	running, exited := kubecontainer.StateRunning, kubecontainer.StateExited
	sb := []*runtimeapi.PodSandboxStatus{readySandbox(0)}
	tests := []struct {
		desc   string
		policy v1.RestartPolicy
		mutate func(pod *v1.Pod)
		status func(pod *v1.Pod) *kubecontainer.PodStatus
		probes *fakeProbes
		// withStarted makes the probe results implement StartupSucceeded.
		withStarted bool
		want        plan
	}{
		{
			desc:   "nothing ran: start the sidecar first",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus { return podStatusOf(pod, sb) },
			want:   plan{SandboxID: "sandbox-0", Init: []int{0}, Kill: noKill()},
		},
		{
			desc:   "sidecar runs: start the next init container",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Init: []int{1}, Kill: noKill()},
		},
		{
			desc:   "sidecar runs, init container done: start the containers",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic := pod.Spec.InitContainers
				return podStatusOf(pod, sb, cstatus(&ic[1], exited, 0), cstatus(&ic[0], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Start: []int{0}, Kill: noKill()},
		},
		{
			desc:   "sidecar exited while the pod runs: restart it, even with Never",
			policy: v1.RestartPolicyNever,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic := pod.Spec.InitContainers
				return podStatusOf(pod, sb, cstatus(&pod.Spec.Containers[0], running, 0), cstatus(&ic[1], exited, 0), cstatus(&ic[0], exited, 0))
			},
			want: plan{SandboxID: "sandbox-0", Init: []int{0}, Kill: noKill()},
		},
		{
			desc:   "sidecar garbage collected while the pod runs: start it again",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.Containers[0], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Init: []int{0}, Kill: noKill()},
		},
		{
			desc:   "sidecar failed its liveness probe: kill and restart it",
			policy: v1.RestartPolicyAlways,
			mutate: func(pod *v1.Pod) { pod.Spec.InitContainers[0].LivenessProbe = &v1.Probe{} },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic := pod.Spec.InitContainers
				return podStatusOf(pod, sb, cstatus(&pod.Spec.Containers[0], running, 0), cstatus(&ic[0], running, 0))
			},
			probes: &fakeProbes{liveness: map[string]bool{"s0-id": true}},
			want: plan{SandboxID: "sandbox-0", Init: []int{0},
				Kill: map[string]string{"s0-id": "Init container s0 failed liveness probe"}},
		},
		{
			desc:   "sidecar spec changed: kill and restart it",
			policy: v1.RestartPolicyAlways,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				old := pod.Spec.InitContainers[0]
				old.Image = "busybox:old"
				return podStatusOf(pod, sb, cstatus(&pod.Spec.Containers[0], running, 0), cstatus(&old, running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Init: []int{0},
				Kill: map[string]string{"s0-id": "Init container s0 definition changed"}},
		},
		{
			desc:   "sidecar startup probe not yet succeeded: the next init container waits",
			policy: v1.RestartPolicyAlways,
			mutate: func(pod *v1.Pod) { pod.Spec.InitContainers[0].StartupProbe = &v1.Probe{} },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], running, 0))
			},
			probes:      &fakeProbes{started: map[string]bool{}},
			withStarted: true,
			want:        plan{SandboxID: "sandbox-0", Kill: noKill()},
		},
		{
			desc:   "sidecar startup probe succeeded: the next init container starts",
			policy: v1.RestartPolicyAlways,
			mutate: func(pod *v1.Pod) { pod.Spec.InitContainers[0].StartupProbe = &v1.Probe{} },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], running, 0))
			},
			probes:      &fakeProbes{started: map[string]bool{"s0-id": true}},
			withStarted: true,
			want:        plan{SandboxID: "sandbox-0", Init: []int{1}, Kill: noKill()},
		},
		{
			desc:   "sidecar failed its startup probe: kill and restart it",
			policy: v1.RestartPolicyAlways,
			mutate: func(pod *v1.Pod) { pod.Spec.InitContainers[0].StartupProbe = &v1.Probe{} },
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				return podStatusOf(pod, sb, cstatus(&pod.Spec.InitContainers[0], running, 0))
			},
			probes: &fakeProbes{startup: map[string]bool{"s0-id": true}},
			want: plan{SandboxID: "sandbox-0", Init: []int{0},
				Kill: map[string]string{"s0-id": "Init container s0 failed startup probe"}},
		},
		{
			desc:   "Never and the containers are done: kill the pod, sidecars are not restarted",
			policy: v1.RestartPolicyNever,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic := pod.Spec.InitContainers
				return podStatusOf(pod, sb, cstatus(&pod.Spec.Containers[0], exited, 0), cstatus(&ic[1], exited, 0), cstatus(&ic[0], running, 0))
			},
			want: plan{KillPod: true, SandboxID: "sandbox-0", Kill: noKill()},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := sidecarPod(tc.policy)
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			env := newTestEnv(t)
			switch {
			case tc.withStarted:
				env.m.probeResults = fakeProbesWithStarted{tc.probes}
			case tc.probes != nil:
				env.m.probeResults = tc.probes
			}
			got := planOf(env.m.computePodActions(pod, tc.status(pod), false))
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("computePodActions:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestComputePodActionsEphemeral: an ephemeral container is started once
// (never again once it has a status), even while the pod initializes, and not
// into a pod being stopped.
func TestComputePodActionsEphemeral(t *testing.T) {
	t.Parallel()
	pod := testPod("c")
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}, TargetContainerName: "c"},
		{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "done", Image: "busybox"}},
	}
	env := newTestEnv(t)
	c := &pod.Spec.Containers[0]
	done := (*v1.Container)(&pod.Spec.EphemeralContainers[1].EphemeralContainerCommon)
	st := podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(c, kubecontainer.StateRunning, 0), cstatus(done, kubecontainer.StateExited, 0))
	if got := env.m.computePodActions(pod, st, false).EphemeralContainersToStart; !reflect.DeepEqual(got, []int{0}) {
		t.Errorf("ephemeral containers to start = %v, want [0] (the exited one is never restarted)", got)
	}
	// The only regular container exited for good: the pod stops, no debug
	// container starts into it.
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	st = podStatusOf(pod, []*runtimeapi.PodSandboxStatus{readySandbox(0)}, cstatus(c, kubecontainer.StateExited, 0))
	if a := env.m.computePodActions(pod, st, false); !a.KillPod || len(a.EphemeralContainersToStart) != 0 {
		t.Errorf("stopping pod: KillPod %v, ephemeral to start %v; want true, none", a.KillPod, a.EphemeralContainersToStart)
	}
}

// TestTargetNamespace: a targeted ephemeral container joins its target's PID
// namespace; a missing target is a configuration error; others are left alone.
func TestTargetNamespace(t *testing.T) {
	t.Parallel()
	pod := testPod("c")
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debug"}, TargetContainerName: "c"}}
	cfg := func() *runtimeapi.ContainerConfig {
		return &runtimeapi.ContainerConfig{Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}}}}
	}
	debug := (*v1.Container)(&pod.Spec.EphemeralContainers[0].EphemeralContainerCommon)
	run := &syncRun{pod: pod, podStatus: podStatusOf(pod, nil, cstatus(&pod.Spec.Containers[0], kubecontainer.StateRunning, 0))}
	got := cfg()
	if err := run.targetNamespace(debug, got); err != nil {
		t.Fatal(err)
	}
	if ns := got.Linux.SecurityContext.NamespaceOptions; ns.Pid != runtimeapi.NamespaceMode_TARGET || ns.TargetId != "c-id" {
		t.Errorf("namespaces = %v, want TARGET c-id", ns)
	}
	regular := cfg()
	if err := run.targetNamespace(&pod.Spec.Containers[0], regular); err != nil || regular.Linux.SecurityContext.NamespaceOptions.Pid != runtimeapi.NamespaceMode_CONTAINER {
		t.Errorf("a regular container's namespaces changed: %v %v", regular.Linux.SecurityContext.NamespaceOptions, err)
	}
	run.podStatus = podStatusOf(pod, nil)
	if err := run.targetNamespace(debug, cfg()); err == nil || err.Error() != "unable to find target container c" {
		t.Errorf("missing target: %v", err)
	}
	if typ := containerType(pod, debug); typ != "ephemeral_container" {
		t.Errorf("containerType = %q", typ)
	}
}
