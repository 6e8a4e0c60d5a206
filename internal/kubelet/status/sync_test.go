package status

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

const testNode = "node-a"

type safetyFunc func(*v1.Pod) bool

func (f safetyFunc) PodResourcesAreReclaimed(p *v1.Pod) bool { return f(p) }

// PodCouldHaveRunningContainers: the tests' pods have stopped containers
// once TerminatePod ran.
func (f safetyFunc) PodCouldHaveRunningContainers(*v1.Pod) bool { return false }

func boundPod(name string, uid k8stypes.UID) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid},
		Spec: v1.PodSpec{NodeName: testNode, RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{Name: "a"}}},
		Status: v1.PodStatus{Phase: v1.PodPending, Conditions: []v1.PodCondition{
			cond(v1.PodScheduled, v1.ConditionTrue, tSched)}},
	}
}

func staticPod(name, hash string) *v1.Pod {
	p := boundPod(name, k8stypes.UID("static-"+hash))
	p.Status = v1.PodStatus{}
	p.Annotations = map[string]string{
		kubecontainer.ConfigSourceAnnotationKey: kubecontainer.FileSource,
		kubecontainer.ConfigHashAnnotationKey:   hash,
	}
	return p
}

func mirrorFor(static *v1.Pod, uid k8stypes.UID, hash string) *v1.Pod {
	m := static.DeepCopy()
	m.UID = uid
	m.Annotations = map[string]string{kubecontainer.ConfigMirrorAnnotationKey: hash, kubecontainer.ConfigHashAnnotationKey: hash}
	return m
}

func runningStatus(restarts int32) v1.PodStatus {
	return v1.PodStatus{
		Phase:             v1.PodRunning,
		PodIP:             "10.1.0.7",
		PodIPs:            []v1.PodIP{{IP: "10.1.0.7"}},
		Conditions:        []v1.PodCondition{cond(v1.PodReady, v1.ConditionTrue, tNew)},
		ContainerStatuses: []v1.ContainerStatus{withID(running("a", "docker://1"), "docker://1", restarts)},
	}
}

// syncedManager is a store with its API syncer.
type syncedManager struct {
	*Manager
	syncer *Syncer
}

func (m syncedManager) syncBatch(ctx context.Context, all bool) int {
	return m.syncer.syncBatch(ctx, all)
}

func (m syncedManager) Run(ctx context.Context) { m.syncer.run(ctx) }

func newSynced(t *testing.T, m *Manager, opts SyncOptions) syncedManager {
	t.Helper()
	opts.Logger = zaptest.NewLogger(t)
	s, err := NewSyncer(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	return syncedManager{Manager: m, syncer: s}
}

func newSyncManager(t *testing.T, safety PodDeletionSafetyProvider, objs ...runtime.Object) (syncedManager, *fake.Clientset) {
	client := fake.NewClientset(objs...)
	m := newSynced(t, NewManager(Options{Logger: zaptest.NewLogger(t)}), SyncOptions{Client: client, NodeName: testNode, PodDeletionSafety: safety})
	return m, client
}

func apiStatus(t *testing.T, client *fake.Clientset, name string) v1.PodStatus {
	t.Helper()
	p, err := client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Status
}

func countActions(client *fake.Clientset, verb, sub string) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == verb && a.GetSubresource() == sub {
			n++
		}
	}
	return n
}

func TestSyncPatchesChangesOnce(t *testing.T) {
	t.Parallel()
	pod := boundPod("p", "u1")
	m, client := newSyncManager(t, nil, pod)
	m.SetPodStatus(pod, runningStatus(0))
	if n := m.syncBatch(context.Background(), false); n != 1 {
		t.Fatalf("synced %d pods, want 1", n)
	}
	got := apiStatus(t, client, "p")
	if got.Phase != v1.PodRunning || got.PodIP != "10.1.0.7" || got.ContainerStatuses[0].ContainerID != "docker://1" {
		t.Fatalf("API status = %+v", got)
	}
	if c := findCondition(got.Conditions, v1.PodScheduled); c == nil || !c.LastTransitionTime.Equal(&tSched) {
		t.Errorf("PodScheduled = %+v, want the scheduler's", c)
	}
	if n := m.syncBatch(context.Background(), false); n != 0 {
		t.Errorf("second pass synced %d pods, want 0", n)
	}
	// Two changes before the next pass: one patch carrying the latest.
	m.SetPodStatus(pod, runningStatus(1))
	m.SetPodStatus(pod, runningStatus(2))
	before := countActions(client, "patch", "status")
	m.syncBatch(context.Background(), false)
	if n := countActions(client, "patch", "status") - before; n != 1 {
		t.Errorf("%d patches for two changes, want 1", n)
	}
	if rc := apiStatus(t, client, "p").ContainerStatuses[0].RestartCount; rc != 2 {
		t.Errorf("restartCount = %d, want 2", rc)
	}
}

func TestSyncNeverPatchesARecreatedPod(t *testing.T) {
	t.Parallel()
	old := boundPod("p", "old-uid")
	m, client := newSyncManager(t, nil, boundPod("p", "new-uid"))
	m.SetPodStatus(old, runningStatus(0))
	m.syncBatch(context.Background(), false)
	if n := countActions(client, "patch", "status"); n != 0 {
		t.Fatalf("%d patches on a pod with another UID", n)
	}
	if n := m.syncBatch(context.Background(), true); n != 0 {
		t.Errorf("full resync retried %d pods after the UID mismatch", n)
	}
}

func TestSyncStaticPodGoesToItsMirror(t *testing.T) {
	t.Parallel()
	static := staticPod("kube-x", "h1")
	m, client := newSyncManager(t, nil)
	m.SetPodStatus(static, runningStatus(0))

	// No mirror pod yet: nothing written, retried at the full resync.
	m.syncBatch(context.Background(), false)
	if n := m.syncBatch(context.Background(), true); n != 1 {
		t.Fatalf("full resync synced %d pods, want 1 (the static pod)", n)
	}
	// A pod with the same name that is not this static pod's mirror.
	if _, err := client.CoreV1().Pods("ns").Create(context.Background(), mirrorFor(static, "m0", "other-hash"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.syncBatch(context.Background(), true)
	if n := countActions(client, "patch", "status"); n != 0 {
		t.Fatalf("patched a mirror pod of another hash")
	}
	if err := client.CoreV1().Pods("ns").Delete(context.Background(), "kube-x", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Pods("ns").Create(context.Background(), mirrorFor(static, "m1", "h1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.syncBatch(context.Background(), true)
	if got := apiStatus(t, client, "kube-x"); got.Phase != v1.PodRunning {
		t.Fatalf("mirror status = %+v", got)
	}
	if a := m.acked[static.UID]; a.apiUID != "m1" {
		t.Errorf("ack = %+v, want the mirror's UID", a)
	}
}

func TestSyncRetriesConflictsAndErrors(t *testing.T) {
	t.Parallel()
	pod := boundPod("p", "u1")
	m, client := newSyncManager(t, nil, pod)
	var patches, gets atomic.Int32
	client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if patches.Add(1) == 1 {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("uid precondition"))
		}
		return false, nil, nil
	})
	client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if gets.Add(1) == 1 {
			return true, nil, apierrors.NewServiceUnavailable("apiserver restarting")
		}
		return false, nil, nil
	})
	m.SetPodStatus(pod, runningStatus(0))
	m.syncBatch(context.Background(), false) // GET fails: left for the next pass
	if got := apiStatus(t, client, "p"); got.Phase == v1.PodRunning {
		t.Fatal("status written despite the failed GET")
	}
	if n := m.syncBatch(context.Background(), false); n != 1 {
		t.Fatalf("next pass synced %d pods, want the failed one", n)
	}
	if got := apiStatus(t, client, "p"); got.Phase != v1.PodRunning {
		t.Fatalf("status after conflict retry = %+v", got)
	}
	if n := patches.Load(); n != 2 {
		t.Errorf("%d patches, want 2 (conflict, retry)", n)
	}
}

func TestSyncDeletesReclaimedTerminatedPods(t *testing.T) {
	t.Parallel()
	pod := boundPod("p", "u1")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	var reclaimed atomic.Bool
	m, client := newSyncManager(t, safetyFunc(func(*v1.Pod) bool { return reclaimed.Load() }), pod)

	m.SetPodStatus(pod, runningStatus(0))
	m.syncBatch(context.Background(), false)
	if countActions(client, "delete", "") != 0 {
		t.Fatal("deleted a pod that is still running")
	}
	m.TerminatePod(pod)
	m.syncBatch(context.Background(), false)
	if got := apiStatus(t, client, "p"); got.Phase != v1.PodFailed {
		t.Fatalf("phase = %s, want Failed", got.Phase)
	}
	if countActions(client, "delete", "") != 0 {
		t.Fatal("deleted a pod whose resources are not reclaimed")
	}
	reclaimed.Store(true)
	if n := m.syncBatch(context.Background(), true); n != 1 {
		t.Fatalf("full resync synced %d pods, want the deletable one", n)
	}
	var del k8stesting.DeleteActionImpl
	for _, a := range client.Actions() {
		if d, ok := a.(k8stesting.DeleteActionImpl); ok {
			del = d
		}
	}
	opts := del.DeleteOptions
	if del.Name != "p" || opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 ||
		opts.Preconditions == nil || *opts.Preconditions.UID != "u1" {
		t.Fatalf("delete = %+v", del)
	}
	if n := m.syncBatch(context.Background(), true); n != 0 {
		t.Errorf("resync after deletion synced %d pods", n)
	}
}

func TestNeedsSync(t *testing.T) {
	t.Parallel()
	pod := boundPod("p", "u1")
	pod.Status = runningStatus(0)
	deleting := pod.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	deleting.Status.Phase = v1.PodFailed
	deleting.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionFalse, Reason: PodFailed, LastTransitionTime: tNew}}
	differs := &entry{pod: boundPod("p", "u1"), status: runningStatus(0), version: 2}
	mk := func(p *v1.Pod, version uint64, finished bool) *entry {
		return &entry{pod: p, status: *p.Status.DeepCopy(), version: version, finished: finished}
	}
	client := fake.NewClientset()
	m := newSynced(t, NewManager(Options{}), SyncOptions{Client: client})
	notReclaimed := newSynced(t, NewManager(Options{}), SyncOptions{Client: client,
		PodDeletionSafety: safetyFunc(func(*v1.Pod) bool { return false })})
	for _, tc := range []struct {
		desc string
		m    *syncedManager
		p    podSync
		all  bool
		want bool
	}{
		{desc: "never acknowledged", p: podSync{e: mk(pod, 1, false)}, want: true},
		{desc: "newer version", p: podSync{e: mk(pod, 3, false), acked: true, ack: ack{version: 2}}, want: true},
		{desc: "acknowledged", p: podSync{e: mk(pod, 2, false), acked: true, ack: ack{version: 2}}, want: false},
		{desc: "acknowledged, full resync, API agrees", p: podSync{e: mk(pod, 2, false), acked: true, ack: ack{version: 2}}, all: true, want: false},
		{desc: "acknowledged, full resync, API differs", p: podSync{e: differs, acked: true, ack: ack{version: 2}}, all: true, want: true},
		{desc: "gone", p: podSync{e: mk(pod, 3, false), acked: true, ack: ack{version: 2, gone: true}}, all: true, want: false},
		{desc: "static pod on full resync", p: podSync{e: mk(staticPod("s", "h"), 2, false), acked: true, ack: ack{version: 2}}, all: true, want: true},
		{desc: "deleting, final", p: podSync{e: mk(deleting, 2, true), acked: true, ack: ack{version: 2}}, all: true, want: true},
		{desc: "deleting, final, changes only", p: podSync{e: mk(deleting, 2, true), acked: true, ack: ack{version: 2}}, want: false},
		{desc: "deleting, not final", p: podSync{e: mk(deleting, 2, false), acked: true, ack: ack{version: 2}}, all: true, want: false},
		{desc: "deleting, final, not reclaimed", m: &notReclaimed, p: podSync{e: mk(deleting, 2, true), acked: true, ack: ack{version: 2}}, all: true, want: false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			mgr := m
			if tc.m != nil {
				mgr = *tc.m
			}
			if got := mgr.syncer.needsSync(tc.p, tc.all); got != tc.want {
				t.Fatalf("needsSync = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRemoveOrphanedStatusesForgetsSyncState(t *testing.T) {
	t.Parallel()
	pod := boundPod("p", "u1")
	m, _ := newSyncManager(t, nil, pod)
	m.SetPodStatus(pod, runningStatus(0))
	m.syncBatch(context.Background(), false)
	if _, ok := m.acked["u1"]; !ok {
		t.Fatal("no acknowledgement recorded")
	}
	m.RemoveOrphanedStatuses(map[k8stypes.UID]bool{})
	if len(m.acked) != 0 || len(m.pods) != 0 {
		t.Fatalf("acked=%v pods=%d after removal", m.acked, len(m.pods))
	}
}

func TestRun(t *testing.T) {
	t.Parallel()
	t.Run("a syncer needs a store and a client", func(t *testing.T) {
		t.Parallel()
		if _, err := NewSyncer(NewManager(Options{}), SyncOptions{}); err == nil {
			t.Error("NewSyncer without a client: no error")
		}
		if _, err := NewSyncer(nil, SyncOptions{Client: fake.NewClientset()}); err == nil {
			t.Error("NewSyncer without a store: no error")
		}
	})
	t.Run("changes are patched promptly and Run stops with ctx", func(t *testing.T) {
		t.Parallel()
		pod := boundPod("p", "u1")
		m, client := newSyncManager(t, nil, pod)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { m.Run(ctx); close(done) }()
		m.SetPodStatus(pod, runningStatus(4))
		deadline := time.Now().Add(5 * time.Second)
		for {
			st := apiStatus(t, client, "p")
			if len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].RestartCount == 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("status not patched: %+v", st)
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not stop")
		}
	})
}

// runningSafety says the pod's containers may still run until stopped is set.
type runningSafety struct{ stopped atomic.Bool }

func (s *runningSafety) PodResourcesAreReclaimed(*v1.Pod) bool      { return s.stopped.Load() }
func (s *runningSafety) PodCouldHaveRunningContainers(*v1.Pod) bool { return !s.stopped.Load() }

// A terminal phase (an eviction's Failed) is held back while the pod's
// containers may still run, as upstream; its DisruptionTarget goes at once.
func TestSyncHoldsTerminalPhaseWhileRunning(t *testing.T) {
	t.Parallel()
	pod := boundPod("p", "u1")
	safety := &runningSafety{}
	m, client := newSyncManager(t, safety, pod)
	m.SetPodStatus(pod, runningStatus(0))
	m.syncBatch(context.Background(), false)
	evicted := runningStatus(0)
	evicted.Phase, evicted.Reason, evicted.Message = v1.PodFailed, "Evicted", "The node was low on resource: memory. "
	evicted.Conditions = append(evicted.Conditions, cond(v1.DisruptionTarget, v1.ConditionTrue, tNow))
	m.SetPodStatus(pod, evicted)
	m.syncBatch(context.Background(), false)
	got := apiStatus(t, client, "p")
	if got.Phase != v1.PodRunning || got.Reason != "" || podCond(got.Conditions, v1.DisruptionTarget) == nil {
		t.Fatalf("while running: phase %s reason %q conditions %s, want Running with DisruptionTarget", got.Phase, got.Reason, condTypes(got.Conditions))
	}
	safety.stopped.Store(true)
	m.syncBatch(context.Background(), true)
	if got := apiStatus(t, client, "p"); got.Phase != v1.PodFailed || got.Reason != "Evicted" {
		t.Fatalf("once stopped: phase %s reason %q, want Failed / Evicted", got.Phase, got.Reason)
	}
}

func podCond(conds []v1.PodCondition, typ v1.PodConditionType) *v1.PodCondition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}
