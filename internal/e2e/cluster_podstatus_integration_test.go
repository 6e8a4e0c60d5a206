//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// Readiness gates of testReadinessGates (upstream's spec uses the same).
const (
	readinessGate1 = "k8s.io/test-condition1"
	readinessGate2 = "k8s.io/test-condition2"
)

// testReadinessGates follows upstream's "[sig-node] Pods should support pod
// readiness gates [NodeConformance]": a running pod with two readiness gates
// is not Ready; a controller (here the test) setting one gate's condition True
// through the status subresource leaves it not Ready; setting the second makes
// the kubelet report it Ready within a minute; setting the first back to False
// makes it not Ready again. The kubelet's own status writes keep the gates'
// conditions as the controller set them.
func testReadinessGates(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	n.waitNodeReady(90 * time.Second)
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-ready", Namespace: n.ns},
		Spec: v1.PodSpec{
			NodeName:                      n.name,
			TerminationGracePeriodSeconds: new(int64(1)),
			Containers: []v1.Container{{Name: "main", Image: busyboxImage, ImagePullPolicy: v1.PullNever,
				Command: []string{"/bin/sh", "-c", "echo container is alive; sleep 10000"}}},
			ReadinessGates: []v1.PodReadinessGate{{ConditionType: readinessGate1}, {ConditionType: readinessGate2}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(n.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	p := n.waitAPIPod(pod.Name, podStartTimeout, "running, its container ready", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return p.Status.Phase == v1.PodRunning && cs != nil && cs.Ready && podCondition(p, v1.PodReady) != ""
	})
	checkReadyCondition(t, p, v1.ConditionFalse, "ReadinessGatesNotReady",
		`corresponding condition of pod readiness gate "k8s.io/test-condition1" does not exist., `+
			`corresponding condition of pod readiness gate "k8s.io/test-condition2" does not exist.`)

	n.patchGate(readinessGate1, v1.ConditionTrue)
	// Upstream's spec waits the sync loop's period, then expects not Ready.
	time.Sleep(10 * time.Second)
	p = n.waitAPIPod(pod.Name, 10*time.Second, "Ready names the missing gate only", func(p *v1.Pod) bool {
		return strings.Contains(readyMessage(p), "test-condition2") && !strings.Contains(readyMessage(p), "test-condition1")
	})
	checkReadyCondition(t, p, v1.ConditionFalse, "ReadinessGatesNotReady",
		`corresponding condition of pod readiness gate "k8s.io/test-condition2" does not exist.`)

	start := time.Now()
	n.patchGate(readinessGate2, v1.ConditionTrue)
	p = n.waitAPIPod(pod.Name, time.Minute, "Ready once both gates are True", func(p *v1.Pod) bool {
		return podCondition(p, v1.PodReady) == v1.ConditionTrue
	})
	t.Logf("Ready %s after the second gate turned True", time.Since(start).Round(time.Millisecond))
	checkGates(t, p, v1.ConditionTrue, v1.ConditionTrue)

	start = time.Now()
	n.patchGate(readinessGate1, v1.ConditionFalse)
	n.waitAPIPod(pod.Name, time.Minute, "not Ready once a gate is False", func(p *v1.Pod) bool {
		return podCondition(p, v1.PodReady) == v1.ConditionFalse
	})
	t.Logf("not Ready %s after the first gate turned False", time.Since(start).Round(time.Millisecond))
	// It stays so past a status resync (10 s), the gates as the test set them.
	time.Sleep(12 * time.Second)
	p, err := n.apiPod(pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	checkReadyCondition(t, p, v1.ConditionFalse, "ReadinessGatesNotReady",
		`the status of pod readiness gate "k8s.io/test-condition1" is not "True", but False`)
	checkGates(t, p, v1.ConditionFalse, v1.ConditionTrue)
	if podCondition(p, v1.ContainersReady) != v1.ConditionTrue {
		t.Errorf("ContainersReady = %q, want True", podCondition(p, v1.ContainersReady))
	}
}

// patchGate sets a readiness gate's condition of pod-ready as a controller
// does: a strategic merge patch of the status subresource naming it alone.
func (n *clusterNode) patchGate(gate string, status v1.ConditionStatus) {
	n.t.Helper()
	patch := fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":%q}]}}`, gate, status)
	_, err := n.c.Client.CoreV1().Pods(n.ns).Patch(context.Background(), "pod-ready", k8stypes.StrategicMergePatchType,
		[]byte(patch), metav1.PatchOptions{}, "status")
	if err != nil {
		n.t.Fatalf("patch condition %s to %s: %v", gate, status, err)
	}
}

func readyMessage(p *v1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Message
		}
	}
	return ""
}

// checkReadyCondition checks the pod's Ready condition.
func checkReadyCondition(t *testing.T, p *v1.Pod, status v1.ConditionStatus, reason, message string) {
	t.Helper()
	for _, c := range p.Status.Conditions {
		if c.Type != v1.PodReady {
			continue
		}
		if c.Status != status || c.Reason != reason || c.Message != message {
			t.Errorf("Ready = %s %q %q, want %s %q %q", c.Status, c.Reason, c.Message, status, reason, message)
		}
		return
	}
	t.Errorf("no Ready condition: %s", podsJSON([]v1.Pod{*p}))
}

// checkGates checks the conditions of the two readiness gates.
func checkGates(t *testing.T, p *v1.Pod, first, second v1.ConditionStatus) {
	t.Helper()
	if got1, got2 := podCondition(p, readinessGate1), podCondition(p, readinessGate2); got1 != first || got2 != second {
		t.Errorf("gate conditions = %q, %q, want %q, %q", got1, got2, first, second)
	}
}

// testPodOSRejection follows upstream's "[sig-node] PodOSRejection
// [NodeConformance] Kubelet [LinuxOnly] should reject pod when the node OS
// doesn't match pod's OS": a pod with spec.os.name windows bound to this
// Linux node fails at admission with upstream's PodOSNotSupported reason and
// message, and a pod labelled kubernetes.io/os=windows with upstream's
// PodOSSelectorNodeLabelDoesNotMatch; neither gets a container, and each
// gets the Warning event upstream records.
func testPodOSRejection(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	n.waitNodeReady(90 * time.Second)
	for _, tc := range []struct {
		name, reason, message string
		mutate                func(*v1.Pod)
	}{
		{name: "wrong-pod-os", reason: "PodOSNotSupported",
			message: "Failed to admit pod as the OS field doesn't match node OS",
			mutate:  func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: v1.Windows} }},
		{name: "wrong-os-label", reason: "PodOSSelectorNodeLabelDoesNotMatch",
			message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
			mutate:  func(p *v1.Pod) { p.Labels = map[string]string{v1.LabelOSStable: "windows"} }},
	} {
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: n.ns},
			Spec: v1.PodSpec{NodeName: n.name, Containers: []v1.Container{
				{Name: tc.name, Image: pauseImage, ImagePullPolicy: v1.PullNever}}},
		}
		tc.mutate(pod)
		created, err := c.Client.CoreV1().Pods(n.ns).Create(context.Background(), pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create pod %s: %v", tc.name, err)
		}
		p := n.waitAPIPod(tc.name, podStartTimeout, "failed with "+tc.reason, func(p *v1.Pod) bool {
			return p.Status.Phase == v1.PodFailed
		})
		if p.Status.Reason != tc.reason || p.Status.Message != "Pod was rejected: "+tc.message {
			t.Errorf("pod %s: reason %q message %q, want %q %q", tc.name, p.Status.Reason, p.Status.Message,
				tc.reason, "Pod was rejected: "+tc.message)
		}
		n.waitEvent(created, tc.reason, tc.message)
		if ids := n.containers(true, "io.kubernetes.pod.uid="+string(created.UID)); len(ids) != 0 {
			t.Errorf("pod %s: the runtime has its containers %v, want none", tc.name, ids)
		}
	}
}
