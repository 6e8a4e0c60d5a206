package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestPodPhase(t *testing.T) {
	m, _ := newTestManager(t)
	pod := testPod(v1.RestartPolicyNever, false)
	if _, ok := m.PodPhase(pod.UID); ok {
		t.Fatal("phase of a pod without status")
	}
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodSucceeded})
	if phase, ok := m.PodPhase(pod.UID); !ok || phase != v1.PodSucceeded {
		t.Fatalf("PodPhase = %q %v, want Succeeded", phase, ok)
	}
}
