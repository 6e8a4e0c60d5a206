package prober

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// TestWorkerMayRestart: a worker keeps probing a terminated container only if
// the container runs again.
func TestWorkerMayRestart(t *testing.T) {
	t.Parallel()
	always, onFailure, never := v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever
	for _, tc := range []struct {
		desc    string
		pod     v1.RestartPolicy
		own     *v1.ContainerRestartPolicy
		code    int32
		podOnly bool
		// restarting: the pod's status has AllContainersRestarting True.
		restarting bool
		noAll      bool
		want       bool
	}{
		{desc: "pod Never", pod: v1.RestartPolicyNever, code: 1, want: false},
		{desc: "pod OnFailure, succeeded", pod: v1.RestartPolicyOnFailure, code: 0, want: false},
		{desc: "pod Never, container OnFailure failed", pod: v1.RestartPolicyNever, own: &onFailure, code: 1, want: true},
		{desc: "pod Always, container Never", pod: v1.RestartPolicyAlways, own: &never, code: 0, want: false},
		{desc: "sidecar in pod Never", pod: v1.RestartPolicyNever, own: &always, code: 0, want: true},
		{desc: "gate off: pod OnFailure keeps probing whatever the exit code", pod: v1.RestartPolicyOnFailure, code: 0, podOnly: true, want: true},
		{desc: "gate off: container OnFailure in pod Never ignored", pod: v1.RestartPolicyNever, own: &onFailure, code: 1, podOnly: true, want: false},
		{desc: "pod restarting all its containers", pod: v1.RestartPolicyNever, own: &never, code: 137, restarting: true, want: true},
		{desc: "RestartAllContainers gate off: the pod's condition is ignored", pod: v1.RestartPolicyNever, own: &never, code: 137,
			restarting: true, noAll: true, want: false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			m := &Manager{rules: kubecontainer.RestartRules{PodPolicyOnly: tc.podOnly, NoRestartAll: tc.noAll}}
			w := &worker{m: m, pod: &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tc.pod}}, container: v1.Container{Name: "a", RestartPolicy: tc.own}}
			status := &v1.PodStatus{}
			if tc.restarting {
				status.Conditions = []v1.PodCondition{{Type: v1.AllContainersRestarting, Status: v1.ConditionTrue}}
			}
			if got := w.mayRestart(tc.code, status); got != tc.want {
				t.Errorf("mayRestart(%d) = %v, want %v", tc.code, got, tc.want)
			}
		})
	}
}
