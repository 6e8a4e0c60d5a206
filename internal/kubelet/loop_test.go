package kubelet

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/admission"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodefeatures"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/prober"
)

// describe renders worker updates as "type:uid" (RunningPod updates as
// "kill-runtime:uid").
func describe(us []podworkers.UpdatePodOptions) []string {
	out := make([]string, 0, len(us))
	for _, u := range us {
		if u.RunningPod != nil {
			out = append(out, "kill-runtime:"+string(u.RunningPod.ID))
			continue
		}
		out = append(out, u.UpdateType.String()+":"+string(u.Pod.UID))
	}
	return out
}

func TestHandleSourceUpdate(t *testing.T) {
	t.Parallel()
	a, b := staticPod("a", "uid-a"), staticPod("b", "uid-b")
	b2 := staticPod("b", "uid-b2", func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx" })
	aChanged := staticPod("a", "uid-a", func(p *v1.Pod) { p.Labels = map[string]string{"v": "2"} })
	for _, tc := range []struct {
		desc   string
		first  []*v1.Pod
		second []*v1.Pod
		want   []string
	}{
		{desc: "adds", second: []*v1.Pod{a, b}, want: []string{"create:uid-a", "create:uid-b"}},
		{desc: "nothing changed", first: []*v1.Pod{a, b}, second: []*v1.Pod{a, b}, want: []string{}},
		{desc: "removal kills", first: []*v1.Pod{a, b}, second: []*v1.Pod{a}, want: []string{"kill:uid-b"}},
		{desc: "update", first: []*v1.Pod{a}, second: []*v1.Pod{aChanged}, want: []string{"update:uid-a"}},
		{desc: "UID change kills the old pod first, then creates the new", first: []*v1.Pod{a, b}, second: []*v1.Pod{a, b2},
			want: []string{"kill:uid-b", "create:uid-b2"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if tc.first != nil {
				e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: tc.first})
				e.workers.take()
			}
			e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: tc.second})
			if got := describe(e.workers.take()); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("worker updates = %v, want %v", got, tc.want)
			}
		})
	}
}

// A status-only change syncs the pod when its Ready condition no longer
// matches its readiness gates, handing the workers the pod with the new
// conditions; other status-only changes sync nothing.
func TestReadinessGateReconcile(t *testing.T) {
	t.Parallel()
	withStatus := func(conds ...v1.PodCondition) *v1.Pod {
		return staticPod("a", "uid-a", func(p *v1.Pod) {
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "k8s.io/gate"}}
			p.Status = v1.PodStatus{Phase: v1.PodRunning, Conditions: conds,
				ContainerStatuses: []v1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Ready: true}}}
		})
	}
	gate := func(s v1.ConditionStatus) v1.PodCondition { return v1.PodCondition{Type: "k8s.io/gate", Status: s} }
	ready := func(s v1.ConditionStatus, msg string) v1.PodCondition {
		return v1.PodCondition{Type: v1.PodReady, Status: s, Message: msg}
	}
	const missing = `corresponding condition of pod readiness gate "k8s.io/gate" does not exist.`
	for _, tc := range []struct {
		desc   string
		second *v1.Pod
		want   string
	}{
		{desc: "the gate turned true", second: withStatus(gate(v1.ConditionTrue), ready(v1.ConditionFalse, missing)), want: "sync:uid-a"},
		{desc: "the kubelet's own status came back", second: withStatus(ready(v1.ConditionFalse, missing))},
		{desc: "the gate and Ready agree", second: withStatus(gate(v1.ConditionTrue), ready(v1.ConditionTrue, ""))},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{withStatus()}})
			e.workers.take()
			e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{tc.second}})
			got := e.workers.take()
			if strings.Join(describe(got), ",") != tc.want {
				t.Fatalf("worker updates = %v, want %q", describe(got), tc.want)
			}
			if len(got) == 1 && got[0].Pod != tc.second {
				t.Errorf("the sync carries %+v, want the pod with the API's new status", got[0].Pod.Status)
			}
		})
	}
}

func TestAdmissionMaxPods(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(o *Options) { o.Config.MaxPods = 2 })
	pods := []*v1.Pod{staticPod("a", "uid-a"), staticPod("b", "uid-b"), staticPod("c", "uid-c")}
	e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: pods})
	if got := describe(e.workers.take()); strings.Join(got, ",") != "create:uid-a,create:uid-b" {
		t.Fatalf("worker updates = %v, want a and b created", got)
	}
	st, ok := e.k.status.GetPodStatus("uid-c")
	if !ok || st.Phase != v1.PodFailed || st.Reason != admission.ReasonOutOfPods {
		t.Fatalf("rejected pod status = %+v", st)
	}
	if ev := e.events.all(); len(ev) != 1 || !strings.Contains(ev[0], "OutOfpods") || !strings.Contains(ev[0], "capacity: 2") {
		t.Errorf("events = %v", ev)
	}
	// a finished pod frees its slot
	e.workers.terminated = map[k8stypes.UID]bool{"uid-a": true}
	d := staticPod("d", "uid-d")
	e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: append(pods, d)})
	if got := describe(e.workers.take()); strings.Join(got, ",") != "create:uid-d" {
		t.Errorf("worker updates = %v, want d created", got)
	}
	// the rejected pod is not restarted by housekeeping
	e.k.housekeeping(context.Background())
	for _, u := range describe(e.workers.take()) {
		if strings.HasSuffix(u, "uid-c") {
			t.Errorf("rejected pod restarted: %s", u)
		}
	}
	// nor started by a change, nor killed by its removal
	cChanged := staticPod("c", "uid-c", func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx" })
	e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{pods[0], pods[1], cChanged, d}})
	e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{pods[0], pods[1], d}})
	if got := describe(e.workers.take()); len(got) != 0 {
		t.Errorf("rejected pod reached the workers: %v", got)
	}
}

func TestPLEGAndProbeEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := staticPod("a", "uid-a")
	e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a}})
	e.workers.take()
	for _, tc := range []struct {
		desc string
		ev   *pleg.PodLifecycleEvent
		want string
	}{
		{"container died syncs", &pleg.PodLifecycleEvent{ID: "uid-a", Type: pleg.ContainerDied, Data: "abc"}, "sync:uid-a"},
		{"container started syncs", &pleg.PodLifecycleEvent{ID: "uid-a", Type: pleg.ContainerStarted}, "sync:uid-a"},
		{"container removed is ignored", &pleg.PodLifecycleEvent{ID: "uid-a", Type: pleg.ContainerRemoved}, ""},
		{"unknown pod is ignored", &pleg.PodLifecycleEvent{ID: "uid-x", Type: pleg.ContainerDied}, ""},
	} {
		e.k.handlePLEGEvent(tc.ev)
		if got := strings.Join(describe(e.workers.take()), ","); got != tc.want {
			t.Errorf("%s: updates = %q, want %q", tc.desc, got, tc.want)
		}
	}
}

// TestRunDispatchesAndStopsWithoutKilling runs the loop: updates from the
// source, PLEG and the prober reach the workers; ctx end stops the workers
// without killing pods.
func TestRunDispatchesAndStopsWithoutKilling(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.pleg.ran = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if err := e.state.Start(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { done <- e.k.Run(ctx) }()
	<-e.pleg.ran

	a := staticPod("a", "uid-a")
	e.source.ch <- kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a}}
	waitUntil(t, "create", func() bool { return len(e.k.Pods()) == 1 })
	e.pleg.ch <- &pleg.PodLifecycleEvent{ID: "uid-a", Type: pleg.ContainerDied}
	e.prober.liveness <- prober.Update{PodUID: "uid-a", Result: prober.Failure, ContainerID: kubecontainer.ContainerID{Type: "docker", ID: "1"}}
	e.prober.liveness <- prober.Update{PodUID: "uid-a", Result: prober.Success, ContainerID: kubecontainer.ContainerID{Type: "docker", ID: "1"}}
	e.prober.readiness <- prober.Update{PodUID: "uid-a", Result: prober.Success, ContainerID: kubecontainer.ContainerID{Type: "docker", ID: "1"}}

	var got []string
	waitUntil(t, "dispatch", func() bool {
		got = append(got, describe(e.workers.take())...)
		return len(got) >= 4
	})
	if want := "create:uid-a,sync:uid-a,sync:uid-a,sync:uid-a"; strings.Join(got, ",") != want {
		t.Errorf("updates = %v, want %s (a liveness success is no sync)", got, want)
	}
	if err := e.k.Healthz(); err != nil {
		t.Errorf("Healthz = %v while running", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after ctx end")
	}
	if !e.workers.stopped {
		t.Error("pod workers not stopped")
	}
	if kills := e.runtime.kills(); len(kills) != 0 {
		t.Errorf("pods killed on exit: %d", len(kills))
	}
	if err := e.k.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
}

func TestRunSkipsWhileRuntimeDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.runtime.statusErr = errors.New("connection refused")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	if err := e.state.Start(ctx); err != nil {
		t.Fatal(err)
	}
	go func() { done <- e.k.Run(ctx) }()
	e.source.ch <- kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{staticPod("a", "uid-a")}}
	time.Sleep(100 * time.Millisecond)
	if len(e.k.Pods()) != 0 {
		t.Error("update dispatched while the runtime is down")
	}
	if err := e.k.Healthz(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Healthz = %v, want the runtime error", err)
	}
	cancel()
	<-done
}

func TestHealthzPLEG(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.ready()
	e.k.lastLoop.Store(time.Now().UnixNano())
	e.pleg.healthy = false
	if err := e.k.Healthz(); err == nil || !strings.Contains(err.Error(), "PLEG") {
		t.Errorf("Healthz = %v, want a PLEG error", err)
	}
	e.pleg.healthy = true
	if err := e.k.Healthz(); err != nil {
		t.Errorf("Healthz = %v", err)
	}
	e.k.lastLoop.Store(time.Now().Add(-time.Hour).UnixNano())
	if err := e.k.Healthz(); err == nil {
		t.Error("Healthz ok with a stuck sync loop")
	}
}

func TestHousekeeping(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a, b := staticPod("a", "uid-a"), staticPod("b", "uid-b")
	e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}})
	e.workers.take()
	e.k.status.SetPodStatus(staticPod("gone", "uid-gone"), v1.PodStatus{Phase: v1.PodRunning})
	e.k.reasons.Update("uid-gone", kubecontainer.PodSyncResult{SyncResults: []*kubecontainer.SyncResult{
		{Action: kubecontainer.StartContainer, Target: "c", Error: kubecontainer.ErrImagePull}}})
	// a is running in a worker; b was forgotten (UID reuse); "terminating" is
	// still being killed; "orphan" is only in the runtime.
	e.workers.known = map[k8stypes.UID]podworkers.PodWorkerSync{
		"uid-a":           {State: podworkers.SyncPod, HasConfig: true},
		"uid-terminating": {State: podworkers.TerminatingPod, HasConfig: true},
		"uid-done":        {State: podworkers.TerminatedPod, HasConfig: true},
	}
	e.runtime.pods = []*kubecontainer.Pod{
		{ID: "uid-a", Name: "a", Namespace: "default"},
		{ID: "uid-orphan", Name: "orphan", Namespace: "default"},
	}
	e.k.housekeeping(context.Background())

	updates := e.workers.take()
	if got := strings.Join(describe(updates), ","); got != "create:uid-b,kill-runtime:uid-orphan" {
		t.Fatalf("updates = %s", got)
	}
	kill := updates[1]
	if kill.UpdateType != podworkers.SyncPodKill || kill.KillPodOptions == nil ||
		*kill.KillPodOptions.PodTerminationGracePeriodSecondsOverride != 1 {
		t.Errorf("orphan kill = %+v, want SyncPodKill with a 1s grace", kill)
	}
	cleanup := e.prober.cleanup[len(e.prober.cleanup)-1]
	if _, ok := cleanup["uid-a"]; !ok || len(cleanup) != 2 {
		t.Errorf("probes kept for %v, want uid-a and uid-terminating", cleanup)
	}
	active := e.volumes.cleanups[len(e.volumes.cleanups)-1]
	for _, uid := range []k8stypes.UID{"uid-a", "uid-b", "uid-terminating", "uid-done", "uid-orphan"} {
		if !active[uid] {
			t.Errorf("pod directory of %s not protected: %v", uid, active)
		}
	}
	if active["uid-gone"] {
		t.Error("gone pod protected")
	}
	if _, ok := e.k.status.GetPodStatus("uid-gone"); ok {
		t.Error("orphaned status kept")
	}
	if _, ok := e.k.reasons.Get("uid-gone", "c"); ok {
		t.Error("orphaned failure reason kept")
	}
}

func TestGarbageCollectUsesWorkers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.k.garbageCollect(context.Background())
	if e.runtime.gcCalls != 1 {
		t.Errorf("GC calls = %d", e.runtime.gcCalls)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		mod  func(*Options)
		want string
	}{
		{"no runtime", func(o *Options) { o.Parts.Runtime = nil }, "Runtime"},
		{"no streaming", func(o *Options) { o.Parts.Streaming = nil }, "Streaming"},
		{"no helper", func(o *Options) { o.Parts.Helper = nil }, "Helper"},
		{"no runtime state", func(o *Options) { o.Parts.State = nil }, "State"},
		{"no sources", func(o *Options) { o.Parts.Sources = nil }, "Sources"},
		{"no PLEG", func(o *Options) { o.Parts.PLEG = nil }, "PLEG"},
		{"no prober", func(o *Options) { o.Parts.Prober = nil }, "Prober"},
		{"no volumes", func(o *Options) { o.Parts.Volumes = nil }, "Volumes"},
		{"no cache without a workers factory", func(o *Options) { o.Parts.NewPodWorkers = nil }, "Cache"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			var opts Options
			newEnv(t, func(o *Options) { opts = *o })
			tc.mod(&opts)
			_, err := New(opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New error = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

// fixedNode is a node getter with a fixed node object (nil: not known yet)
// and, in the API server, fresh (nil: the read fails).
type fixedNode struct{ node, fresh *v1.Node }

func (f fixedNode) Node() (*v1.Node, bool) { return f.node, f.node != nil }

func (f fixedNode) FreshNode(context.Context) (*v1.Node, error) {
	if f.fresh == nil {
		return nil, errors.New("the API server is away")
	}
	return f.fresh, nil
}

// A pod whose node affinity only the API server's node matches (a label
// newer than the known node) is admitted after a fresh read, as upstream's
// predicate admit handler does; without the label there either, or when the
// read fails, it is rejected with upstream's reason and message.
func TestAdmissionRereadsNodeForAffinity(t *testing.T) {
	t.Parallel()
	known := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}
	labelled := known.DeepCopy()
	labelled.Labels = map[string]string{"node": "node-1"}
	for _, tc := range []struct {
		desc         string
		fresh        *v1.Node
		wantAdmitted bool
	}{
		{desc: "the API server's node has the label", fresh: labelled, wantAdmitted: true},
		{desc: "nor has the API server's", fresh: known},
		{desc: "the read fails"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(o *Options) { o.Parts.Node = fixedNode{node: known, fresh: tc.fresh} })
			pod := staticPod("p", "uid-p", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"node": "node-1"} })
			e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{pod}})
			st, _ := e.k.status.GetPodStatus(pod.UID)
			if tc.wantAdmitted {
				if got := describe(e.workers.take()); strings.Join(got, ",") != "create:uid-p" || st.Phase == v1.PodFailed {
					t.Errorf("worker updates = %v, status %+v; want the pod admitted", got, st)
				}
				return
			}
			if st.Phase != v1.PodFailed || st.Reason != admission.ReasonNodeAffinity ||
				st.Message != "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector" {
				t.Errorf("status = %+v, want rejected with NodeAffinity", st)
			}
		})
	}
}

// fixedAllocatable is the kubelet's own allocatable, never changing.
type fixedAllocatable v1.ResourceList

func (a fixedAllocatable) Allocatable() v1.ResourceList { return v1.ResourceList(a) }

// Requests are admitted against the node object's allocatable when the
// kubelet has one, else against its own (upstream's getNodeAnyWay).
func TestAdmissionAllocatable(t *testing.T) {
	t.Parallel()
	needs2CPU := func(name string) *v1.Pod {
		return staticPod(name, "uid-"+name, func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
		})
	}
	own := fixedAllocatable{v1.ResourceCPU: resource.MustParse("1")}
	bigNode := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("4")}}}
	for _, tc := range []struct {
		desc       string
		node       *v1.Node
		wantReason string
	}{
		{desc: "no node object: the kubelet's own allocatable", wantReason: "OutOfcpu"},
		{desc: "the node object's allocatable", node: bigNode},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, func(o *Options) { o.Parts.Resources, o.Parts.Node = own, fixedNode{node: tc.node} })
			pod := needs2CPU("p")
			e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{pod}})
			st, _ := e.k.status.GetPodStatus(pod.UID)
			if tc.wantReason == "" {
				if got := describe(e.workers.take()); strings.Join(got, ",") != "create:uid-p" || st.Phase == v1.PodFailed {
					t.Errorf("worker updates = %v, status %+v; want the pod admitted", got, st)
				}
				return
			}
			if st.Phase != v1.PodFailed || st.Reason != tc.wantReason ||
				st.Message != "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 0, capacity: 1000" {
				t.Errorf("status = %+v, want rejected with %s", st, tc.wantReason)
			}
		})
	}
}

// A pod for another operating system is rejected before anything runs, with
// upstream's reason and message.
func TestAdmissionRejectsOtherOS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	pod := staticPod("w", "uid-w", func(p *v1.Pod) { p.Spec.OS = &v1.PodOS{Name: "windows"} })
	e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{pod}})
	if got := describe(e.workers.take()); len(got) != 0 {
		t.Fatalf("worker updates = %v, want none", got)
	}
	st, _ := e.k.status.GetPodStatus(pod.UID)
	if st.Phase != v1.PodFailed || st.Reason != admission.ReasonOSNotSupported ||
		st.Message != "Pod was rejected: Failed to admit pod as the OS field doesn't match node OS" {
		t.Errorf("status = %+v, want rejected with %s", st, admission.ReasonOSNotSupported)
	}
}

// With the node's declared features: a pod that needs an undeclared one is
// rejected before anything runs (upstream's reason and message); an update
// that needs one is still handed to the workers, with a warning event.
func TestNodeDeclaredFeatures(t *testing.T) {
	t.Parallel()
	// Every gate off: nothing is declared, RestartAllContainers included.
	declared, err := nodefeatures.Discover(func(string) bool { return false }, "v1.37.1")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(o *Options) { o.Parts.Features = declared })
	restartAll := staticPod("r", "uid-r", func(p *v1.Pod) {
		p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestartAllContainers,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{3}}}}
	})
	a := staticPod("a", "uid-a")
	e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{restartAll, a}})
	if got := describe(e.workers.take()); strings.Join(got, ",") != "create:uid-a" {
		t.Fatalf("worker updates = %v, want create:uid-a", got)
	}
	st, _ := e.k.status.GetPodStatus(restartAll.UID)
	if st.Phase != v1.PodFailed || st.Reason != nodefeatures.ReasonUnsupported ||
		st.Message != "Pod was rejected: Pod requires node features that are not available: RestartAllContainersOnContainerExits" {
		t.Errorf("status = %+v, want rejected with %s", st, nodefeatures.ReasonUnsupported)
	}

	resized := staticPod("a", "uid-a", func(p *v1.Pod) {
		p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
	})
	e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{resized}})
	if got := describe(e.workers.take()); strings.Join(got, ",") != "update:uid-a" {
		t.Errorf("worker updates = %v, want update:uid-a", got)
	}
	want := "Warning FailedNodeDeclaredFeaturesCheck: Pod requires node features that are not available: InPlacePodLevelResourcesVerticalScaling"
	if !slices.Contains(e.events.all(), want) {
		t.Errorf("events = %v, want %q", e.events.all(), want)
	}
}
