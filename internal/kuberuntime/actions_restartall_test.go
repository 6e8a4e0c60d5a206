package kuberuntime

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// restartAllOn is a rule restarting all the pod's containers on the exit
// codes.
func restartAllOn(codes ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{
		Action:    v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes},
	}
}

// resetOf is the comparable form of ContainersToReset: container IDs, with
// "kill " before the running ones.
func resetOf(a podActions) []string {
	var out []string
	for _, r := range a.ContainersToReset {
		id := r.id.ID
		if r.kill {
			id = "kill " + id
		}
		out = append(out, id)
	}
	return out
}

// restartAllPod has the init container i0, the sidecar s, and the regular
// containers a (Never, restarting all on 42) and b.
func restartAllPod() *v1.Pod {
	pod := testPod("a", "b")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	pod.Spec.InitContainers = []v1.Container{testContainer("i0"), testContainer("s")}
	setRestart(&pod.Spec.InitContainers[1], v1.ContainerRestartPolicyAlways)
	setRestart(&pod.Spec.Containers[0], v1.ContainerRestartPolicyNever, restartAllOn(42))
	return pod
}

func TestComputePodActionsRestartAllContainers(t *testing.T) {
	t.Parallel()
	running, exited := kubecontainer.StateRunning, kubecontainer.StateExited
	sb := []*runtimeapi.PodSandboxStatus{readySandbox(0)}
	with := func(id string, s *kubecontainer.ContainerStatus) *kubecontainer.ContainerStatus {
		s.ID.ID = id
		return s
	}
	tests := []struct {
		desc       string
		mutate     func(pod *v1.Pod)
		status     func(pod *v1.Pod) *kubecontainer.PodStatus
		restartAll bool
		noAll      bool
		wantReset  []string
		want       plan
	}{
		{desc: "regular container exited 42: the others are killed and removed first, the source last",
			restartAll: true,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic, c := pod.Spec.InitContainers, pod.Spec.Containers
				return podStatusOf(pod, sb, cstatus(&ic[0], exited, 0), cstatus(&ic[1], running, 0),
					cstatus(&c[0], exited, 42), cstatus(&c[1], running, 0))
			},
			wantReset: []string{"kill b-id", "i0-id", "kill s-id", "a-id"},
			want:      plan{SandboxID: "sandbox-0", Kill: noKill()}},
		{desc: "every instance of a container goes, not only the newest",
			restartAll: true,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic, c := pod.Spec.InitContainers, pod.Spec.Containers
				return podStatusOf(pod, sb, with("i0-new", cstatus(&ic[0], exited, 0)), with("i0-old", cstatus(&ic[0], exited, 1)),
					cstatus(&c[0], exited, 42))
			},
			wantReset: []string{"i0-new", "i0-old", "a-id"},
			want:      plan{SandboxID: "sandbox-0", Kill: noKill()}},
		{desc: "init container exited 42: it goes last, after the sidecar",
			restartAll: true,
			mutate: func(pod *v1.Pod) {
				setRestart(&pod.Spec.InitContainers[0], v1.ContainerRestartPolicyNever, restartAllOn(42))
			},
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic := pod.Spec.InitContainers
				return podStatusOf(pod, sb, cstatus(&ic[1], running, 0), cstatus(&ic[0], exited, 42))
			},
			wantReset: []string{"kill s-id", "i0-id"},
			want:      plan{SandboxID: "sandbox-0", Kill: noKill()}},
		{desc: "another exit code of the source is a target like any other",
			restartAll: true,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				c := pod.Spec.Containers
				return podStatusOf(pod, sb, cstatus(&c[0], exited, 1), cstatus(&c[1], exited, 137))
			},
			wantReset: []string{"a-id", "b-id"},
			want:      plan{SandboxID: "sandbox-0", Kill: noKill()}},
		{desc: "the pod not restarting: the source is restarted on its own",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic, c := pod.Spec.InitContainers, pod.Spec.Containers
				return podStatusOf(pod, sb, cstatus(&ic[0], exited, 0), cstatus(&ic[1], running, 0),
					cstatus(&c[0], exited, 42), cstatus(&c[1], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Start: []int{0}, Kill: noKill()}},
		{desc: "cleaned up (nothing left): the pod starts over from its first init container",
			status: func(pod *v1.Pod) *kubecontainer.PodStatus { return podStatusOf(pod, sb) },
			want:   plan{SandboxID: "sandbox-0", Init: []int{0}, Kill: noKill()}},
		{desc: "gate off: restartAll is ignored, the source stays down",
			restartAll: true, noAll: true,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				ic, c := pod.Spec.InitContainers, pod.Spec.Containers
				return podStatusOf(pod, sb, cstatus(&ic[0], exited, 0), cstatus(&ic[1], running, 0),
					cstatus(&c[0], exited, 42), cstatus(&c[1], running, 0))
			},
			want: plan{SandboxID: "sandbox-0", Kill: noKill()}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			pod := restartAllPod()
			if tc.mutate != nil {
				tc.mutate(pod)
			}
			env := newTestEnv(t, func(o *Options) { o.RestartRules = kubecontainer.RestartRules{NoRestartAll: tc.noAll} })
			a := env.m.computePodActions(pod, tc.status(pod), tc.restartAll)
			if got := planOf(a); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("computePodActions:\n got %+v\nwant %+v", got, tc.want)
			}
			if got := resetOf(a); !reflect.DeepEqual(got, tc.wantReset) {
				t.Errorf("ContainersToReset = %v, want %v", got, tc.wantReset)
			}
		})
	}
}

// TestSyncPodRestartAllContainers: the sync of a pod restarting all its
// containers kills the running ones (Killing event "killing", the minimum
// grace) and removes every container, keeping their logs and the sandbox;
// the next sync starts the pod over, each container at the attempt after its
// last log file.
func TestSyncPodRestartAllContainers(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	pod := testPod("a", "b")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	setRestart(&pod.Spec.Containers[0], v1.ContainerRestartPolicyNever, restartAllOn(42))
	e.syncOnce(t, pod, nil)
	if n := len(e.containersNamed("a")) + len(e.containersNamed("b")); n != 2 {
		t.Fatalf("%d containers after the first sync, want 2", n)
	}
	logDir := buildPodLogsDirectory(e.logsDir, pod.Namespace, pod.Name, pod.UID)
	for _, name := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(logDir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(logDir, name, "0.log"), []byte("ran\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.exitContainers("a", 42, time.Now())

	status, err := e.m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	r := e.m.SyncPod(context.Background(), pod, status, nil, nil, true)
	if err := r.Error(); err != nil {
		t.Fatalf("reset sync: %v", err)
	}
	for _, name := range []string{"a", "b"} {
		if sr := resultFor(r, kubecontainer.RemoveContainer, name); sr == nil || sr.Error != nil {
			t.Errorf("RemoveContainer %s = %+v, want a success", name, sr)
		}
		if left := e.containersNamed(name); len(left) != 0 {
			t.Errorf("container %s still in the runtime after the reset: %v", name, left)
		}
		if _, err := os.Stat(filepath.Join(logDir, name, "0.log")); err != nil {
			t.Errorf("log of %s removed with its container: %v", name, err)
		}
	}
	if e.calls("StopContainer") != 1 || e.calls("RunPodSandbox") != 1 || e.calls("StopPodSandbox") != 0 {
		t.Errorf("calls %v: want one StopContainer (b, running), the sandbox kept", e.runtime.GetCalls())
	}
	if !e.recorder.has("Killing") || !slices.Contains(e.recorder.events(), "Killing: killing") {
		t.Errorf("events %v, want Killing: killing", e.recorder.events())
	}

	r = e.syncOnce(t, pod, nil)
	if err := r.Error(); err != nil {
		t.Fatalf("restart sync: %v", err)
	}
	for _, name := range []string{"a", "b"} {
		cs := e.containersNamed(name)
		if len(cs) != 1 || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING || cs[0].Metadata.Attempt != 1 {
			t.Errorf("container %s after the restart: %v, want one running at attempt 1", name, cs)
		}
	}
}
