//go:build linux

package status

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

const gateCondition = v1.PodConditionType("example.com/gate")

func newAPIManager(t *testing.T, client kubernetes.Interface, node string, safety PodDeletionSafetyProvider) syncedManager {
	return newSynced(t, NewManager(Options{Logger: zaptest.NewLogger(t)}),
		SyncOptions{Client: client, NodeName: node, PodDeletionSafety: safety, SyncPeriod: 300 * time.Millisecond})
}

// A pod placed by the real scheduler gets the kubelet's status; the
// scheduler's PodScheduled and a readiness gate set by a controller survive.
func TestIntegrationPodStatusPatched(t *testing.T) {
	c := shared.Get(t)
	node := nodeName(t)
	nc := c.NodeClient(t, node)
	registerNode(t, c, nc, node)

	pod := testPodOn("patched-"+node, "", v1.RestartPolicyAlways, "c")
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	pod.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gateCondition}}
	createPod(t, c, pod)
	scheduled := waitPod(t, c.Client, "default", pod.Name, 30*time.Second, func(p *v1.Pod) bool {
		sc := findCondition(p.Status.Conditions, v1.PodScheduled)
		return p.Spec.NodeName == node && sc != nil && sc.Status == v1.ConditionTrue
	})
	schedTime := findCondition(scheduled.Status.Conditions, v1.PodScheduled).LastTransitionTime
	// A controller owns the readiness gate.
	scheduled.Status.Conditions = append(scheduled.Status.Conditions, v1.PodCondition{
		Type: gateCondition, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now()})
	apiPod, err := c.Client.CoreV1().Pods("default").UpdateStatus(context.Background(), scheduled, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	time.Sleep(1100 * time.Millisecond) // the kubelet's PodScheduled time must differ from the scheduler's
	m := newAPIManager(t, nc, node, nil)
	runManager(t, m)
	m.SetPodStatus(apiPod, kubeletStatus(true, "10.244.0.5", map[string]int32{"c": 0}))

	got := waitPod(t, c.Client, "default", pod.Name, 10*time.Second, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1
	})
	st := got.Status
	if st.PodIP != "10.244.0.5" || len(st.PodIPs) != 1 || st.HostIP != "10.0.0.10" || len(st.HostIPs) != 1 || st.StartTime == nil {
		t.Errorf("IPs/startTime: %+v", st)
	}
	cs := st.ContainerStatuses[0]
	if cs.Name != "c" || cs.ContainerID != "docker://c-0" || cs.State.Running == nil || !cs.Ready || cs.ImageID == "" {
		t.Errorf("container status = %+v", cs)
	}
	for _, ct := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized, v1.PodReady, v1.ContainersReady, gateCondition} {
		if c := findCondition(st.Conditions, ct); c == nil || c.Status != v1.ConditionTrue {
			t.Errorf("condition %s = %+v", ct, c)
		}
	}
	if sc := findCondition(st.Conditions, v1.PodScheduled); sc == nil || !sc.LastTransitionTime.Equal(&schedTime) {
		t.Errorf("PodScheduled = %+v, want the scheduler's (at %v)", sc, schedTime)
	}
	if st.QOSClass != v1.PodQOSBestEffort {
		t.Errorf("qosClass = %q, want the API server's", st.QOSClass)
	}
}

// A status computed from stale data (a restarted kubelet) never moves the API
// status backwards, while its other changes land; a recreated pod of the
// same name is never written with the old pod's status.
func TestIntegrationStatusNeverGoesBackwards(t *testing.T) {
	c := shared.Get(t)
	node := nodeName(t)
	nc := c.NodeClient(t, node)
	registerNode(t, c, nc, node)

	t.Run("restart count and terminated containers", func(t *testing.T) {
		pod := createPod(t, c, testPodOn("backwards-"+node, node, v1.RestartPolicyOnFailure, "a", "b"))
		first := kubeletStatus(false, "10.244.1.5", map[string]int32{"a": 3, "b": 0})
		finished := metav1.Now()
		first.ContainerStatuses[1].Ready, first.ContainerStatuses[1].State = false, v1.ContainerState{
			Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: finished, FinishedAt: finished}}
		m1 := newAPIManager(t, nc, node, nil)
		m1.SetPodStatus(pod, first)
		syncUntilAcked(t, m1, pod.UID)

		// A new kubelet with a stale pod copy: a's restart count went down, b
		// (the same container) is running again, and the pod became ready.
		stale := pod.DeepCopy()
		stale.Status = v1.PodStatus{}
		second := kubeletStatus(true, "10.244.1.5", map[string]int32{"a": 1, "b": 0})
		second.ContainerStatuses[0].ContainerID = "docker://a-4"
		m2 := newAPIManager(t, nc, node, nil)
		m2.SetPodStatus(stale, second)
		m2.syncBatch(context.Background(), false)
		if a := m2.acked[pod.UID]; a.version != m2.pods[pod.UID].version {
			t.Fatalf("second status not acknowledged by the API server (ack %+v)", a)
		}
		st := waitPod(t, c.Client, "default", pod.Name, 5*time.Second, func(*v1.Pod) bool { return true }).Status
		if r := findCondition(st.Conditions, v1.PodReady); r == nil || r.Status != v1.ConditionTrue {
			t.Errorf("Ready = %+v, want the new True", r)
		}
		a, b := findByName(st.ContainerStatuses, "a"), findByName(st.ContainerStatuses, "b")
		if a == nil || a.RestartCount != 3 || a.ContainerID != "docker://a-4" {
			t.Errorf("a = %+v, want restartCount 3 on the new container", a)
		}
		if b == nil || b.State.Terminated == nil {
			t.Errorf("b = %+v, want still terminated", b)
		}
	})

	t.Run("terminal phase", func(t *testing.T) {
		pod := createPod(t, c, testPodOn("terminal-"+node, node, v1.RestartPolicyNever, "a"))
		done := kubeletStatus(false, "10.244.1.6", map[string]int32{"a": 0})
		done.Phase = v1.PodSucceeded
		done.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 0, Reason: "Completed", StartedAt: metav1.Now(), FinishedAt: metav1.Now()}}
		m1 := newAPIManager(t, nc, node, nil)
		m1.SetPodStatus(pod, done)
		syncUntilAcked(t, m1, pod.UID)

		stale := pod.DeepCopy()
		stale.Status = v1.PodStatus{}
		m2 := newAPIManager(t, nc, node, nil)
		m2.SetPodStatus(stale, kubeletStatus(true, "10.244.1.6", map[string]int32{"a": 0}))
		m2.syncBatch(context.Background(), false)
		if a := m2.acked[pod.UID]; a.version != m2.pods[pod.UID].version {
			t.Fatalf("second status not acknowledged by the API server (ack %+v)", a)
		}
		st := waitPod(t, c.Client, "default", pod.Name, 5*time.Second, func(*v1.Pod) bool { return true }).Status
		if st.Phase != v1.PodSucceeded || st.ContainerStatuses[0].State.Terminated == nil {
			t.Errorf("status = %+v, want still Succeeded and terminated", st)
		}
		if r := findCondition(st.Conditions, v1.PodReady); r == nil || r.Status != v1.ConditionFalse {
			t.Errorf("Ready = %+v, want False on a terminal pod", r)
		}
	})

	t.Run("recreated pod", func(t *testing.T) {
		old := createPod(t, c, testPodOn("recreated-"+node, node, v1.RestartPolicyAlways, "a"))
		forceDelete(c, "default", old.Name)
		waitGone(t, c.Client, "default", old.Name)
		fresh := createPod(t, c, testPodOn(old.Name, node, v1.RestartPolicyAlways, "a"))
		m := newAPIManager(t, nc, node, nil)
		m.SetPodStatus(old, kubeletStatus(true, "10.244.1.7", map[string]int32{"a": 0}))
		m.syncBatch(context.Background(), false)
		got, err := c.Client.CoreV1().Pods("default").Get(context.Background(), old.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.UID != fresh.UID || got.Status.Phase != v1.PodPending || len(got.Status.ContainerStatuses) != 0 {
			t.Errorf("recreated pod was written: %+v", got.Status)
		}
	})
}

// Label updates by an admin while the kubelet keeps changing the status: no
// write is lost on either side.
func TestIntegrationConcurrentUpdates(t *testing.T) {
	c := shared.Get(t)
	node := nodeName(t)
	nc := c.NodeClient(t, node)
	registerNode(t, c, nc, node)
	pod := createPod(t, c, testPodOn("concurrent-"+node, node, v1.RestartPolicyAlways, "a"))
	m := newAPIManager(t, nc, node, nil)
	runManager(t, m)

	const rounds = 12 // the admin client is rate limited (5 QPS)
	errs := make(chan error, 1)
	go func() {
		for i := range rounds {
			err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
				p, err := c.Client.CoreV1().Pods("default").Get(context.Background(), pod.Name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if p.Labels == nil {
					p.Labels = map[string]string{}
				}
				p.Labels[fmt.Sprintf("l%d", i)] = "x"
				_, err = c.Client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for i := 1; i <= rounds; i++ {
		m.SetPodStatus(pod, kubeletStatus(i%2 == 0, "10.244.2.5", map[string]int32{"a": int32(i)}))
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-errs; err != nil {
		t.Fatalf("label updates: %v", err)
	}
	got := waitPod(t, c.Client, "default", pod.Name, 15*time.Second, func(p *v1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == rounds
	})
	for i := range rounds {
		if got.Labels[fmt.Sprintf("l%d", i)] != "x" {
			t.Errorf("label l%d lost: %v", i, got.Labels)
		}
	}
}

type toggleSafety struct{ reclaimed atomic.Bool }

func (s *toggleSafety) PodResourcesAreReclaimed(*v1.Pod) bool { return s.reclaimed.Load() }

func (s *toggleSafety) PodCouldHaveRunningContainers(*v1.Pod) bool { return false }

// A pod deleted by a user is removed (grace period 0) by the node once its
// status is final and its resources are reclaimed, not before.
func TestIntegrationDeleteAfterTermination(t *testing.T) {
	c := shared.Get(t)
	node := nodeName(t)
	nc := c.NodeClient(t, node)
	registerNode(t, c, nc, node)
	pod := createPod(t, c, testPodOn("deleted-"+node, node, v1.RestartPolicyAlways, "a"))
	safety := &toggleSafety{}
	m := newAPIManager(t, nc, node, safety)
	runManager(t, m)
	m.SetPodStatus(pod, kubeletStatus(true, "10.244.3.5", map[string]int32{"a": 0}))
	waitPod(t, c.Client, "default", pod.Name, 10*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	if err := c.Client.CoreV1().Pods("default").Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleting := waitPod(t, c.Client, "default", pod.Name, 10*time.Second, func(p *v1.Pod) bool { return p.DeletionTimestamp != nil })
	m.SetPodStatus(deleting, kubeletStatus(true, "10.244.3.5", map[string]int32{"a": 0}))
	time.Sleep(time.Second) // a few resyncs: still running, so still there
	m.TerminatePod(deleting)
	failed := waitPod(t, c.Client, "default", pod.Name, 10*time.Second, func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if cs := failed.Status.ContainerStatuses[0]; cs.State.Terminated == nil || cs.State.Terminated.Reason != ContainerReasonStatusUnknown {
		t.Errorf("container status = %+v", cs)
	}
	time.Sleep(time.Second) // not reclaimed yet: still there
	if _, err := c.Client.CoreV1().Pods("default").Get(context.Background(), pod.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("pod removed before its resources were reclaimed: %v", err)
	}
	safety.reclaimed.Store(true)
	waitGone(t, c.Client, "default", pod.Name)
}

// A static pod's mirror pod is created by the node identity, its status lands
// on it, and it is deleted with a UID precondition.
func TestIntegrationMirrorPod(t *testing.T) {
	c := shared.Get(t)
	node := nodeName(t)
	nc := c.NodeClient(t, node)
	ctx := context.Background()
	static := testPodOn("static-"+node, node, v1.RestartPolicyAlways, "a")
	static.UID = "static-uid-" + k8stypes.UID(node)
	static.Annotations = map[string]string{
		kubecontainer.ConfigSourceAnnotationKey:    kubecontainer.FileSource,
		kubecontainer.ConfigHashAnnotationKey:      "hash-1",
		kubecontainer.ConfigFirstSeenAnnotationKey: time.Now().Format(time.RFC3339),
	}
	mc := NewMirrorClient(nc, node)
	if err := mc.CreateMirrorPod(ctx, static); err == nil {
		t.Fatal("CreateMirrorPod succeeded before the Node exists")
	}
	nodeObj := registerNode(t, c, nc, node)
	t.Cleanup(func() { forceDelete(c, static.Namespace, static.Name) })

	m := newAPIManager(t, nc, node, nil)
	runManager(t, m)
	m.SetPodStatus(static, kubeletStatus(true, "10.0.0.10", map[string]int32{"a": 0}))

	if err := mc.CreateMirrorPod(ctx, static); err != nil {
		t.Fatal(err)
	}
	if err := mc.CreateMirrorPod(ctx, static); err != nil {
		t.Fatalf("second CreateMirrorPod: %v", err)
	}
	mirror := waitPod(t, c.Client, static.Namespace, static.Name, 10*time.Second, func(p *v1.Pod) bool {
		return p.Status.Phase == v1.PodRunning && len(p.Status.ContainerStatuses) == 1
	})
	if !IsMirrorPod(mirror) || !MirrorMatchesStatic(mirror, static) {
		t.Errorf("mirror annotations = %v", mirror.Annotations)
	}
	if refs := mirror.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != nodeObj.UID {
		t.Errorf("ownerReferences = %+v", refs)
	}
	if mirror.Status.PodIP != "10.0.0.10" || !mirror.Status.ContainerStatuses[0].Ready {
		t.Errorf("mirror status = %+v", mirror.Status)
	}

	wrong := k8stypes.UID("not-the-mirror")
	if ok, err := mc.DeleteMirrorPod(ctx, static.Namespace, static.Name, &wrong); err != nil || !ok {
		t.Fatalf("DeleteMirrorPod(wrong UID) = %v, %v", ok, err)
	}
	if _, err := c.Client.CoreV1().Pods(static.Namespace).Get(ctx, static.Name, metav1.GetOptions{}); err != nil {
		t.Fatalf("mirror pod deleted despite the UID precondition: %v", err)
	}
	if ok, err := mc.DeleteMirrorPod(ctx, static.Namespace, static.Name, &mirror.UID); err != nil || !ok {
		t.Fatalf("DeleteMirrorPod = %v, %v", ok, err)
	}
	waitGone(t, c.Client, static.Namespace, static.Name)
	if ok, err := mc.DeleteMirrorPod(ctx, static.Namespace, static.Name, nil); err != nil || !ok {
		t.Fatalf("DeleteMirrorPod of a gone pod = %v, %v", ok, err)
	}
}

func waitGone(t *testing.T, client kubernetes.Interface, namespace, name string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		_, err := client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pod %s/%s still exists", namespace, name)
}

// syncUntilAcked syncs m until the API server acknowledged the pod's latest
// status, as the real resync would: right after a pod is created the Node
// authorizer may not know it is bound to the node yet (403 on the GET).
func syncUntilAcked(t *testing.T, m syncedManager, uid k8stypes.UID) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.syncBatch(context.Background(), false)
		m.mu.RLock()
		a, ok := m.acked[uid]
		acked := ok && a.version == m.pods[uid].version
		m.mu.RUnlock()
		if acked {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of pod %s not acknowledged within 10s (ack %+v)", uid, a)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
