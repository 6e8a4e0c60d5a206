package nodestatus

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// readiness is a settable Readiness func.
type readiness struct {
	mu  sync.Mutex
	err error
}

func (r *readiness) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

func (r *readiness) get() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func TestConditionsLifecycle(t *testing.T) {
	t.Parallel()
	ready := &readiness{}
	c, _, h, clk, rec := testController(t, Options{Readiness: ready.get})
	node := &v1.Node{}
	ctx := context.Background()

	// 1. A new node: pressure conditions False, Ready True, in upstream order.
	c.setNodeStatus(ctx, node)
	types := []v1.NodeConditionType{}
	for _, cond := range node.Status.Conditions {
		types = append(types, cond.Type)
	}
	wantTypes := []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure, v1.NodeReady}
	if !slices.Equal(types, wantTypes) {
		t.Fatalf("condition types = %v, want %v", types, wantTypes)
	}
	for _, want := range []struct {
		t      v1.NodeConditionType
		status v1.ConditionStatus
		reason string
	}{
		{v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory"},
		{v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure"},
		{v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID"},
		{v1.NodeReady, v1.ConditionTrue, "KubeletReady"},
	} {
		got := condition(node, want.t)
		if got.Status != want.status || got.Reason != want.reason {
			t.Errorf("%s = %s/%s, want %s/%s", want.t, got.Status, got.Reason, want.status, want.reason)
		}
	}
	if got := condition(node, v1.NodeReady).Message; got != "kubelet is posting ready status" {
		t.Errorf("ready message = %q", got)
	}
	checkEvents(t, rec, []string{"Normal NodeHasSufficientMemory", "Normal NodeHasNoDiskPressure", "Normal NodeHasSufficientPID"})
	created := node.Status.Conditions[0].LastTransitionTime

	// 2. Same state later: heartbeats move, transitions do not, no events.
	clk.Step(10 * time.Second)
	c.setNodeStatus(ctx, node)
	for _, cond := range node.Status.Conditions {
		if !cond.LastHeartbeatTime.Time.Equal(clk.Now()) {
			t.Errorf("%s heartbeat = %v, want %v", cond.Type, cond.LastHeartbeatTime, clk.Now())
		}
		if !cond.LastTransitionTime.Equal(&created) {
			t.Errorf("%s transition moved to %v", cond.Type, cond.LastTransitionTime)
		}
	}
	if ev := drainEvents(rec); len(ev) != 0 {
		t.Errorf("events on an unchanged status: %v", ev)
	}

	// 3. Runtime down and memory low: Ready False with the error, MemoryPressure True.
	clk.Step(10 * time.Second)
	ready.set(errors.New("container runtime is down"))
	h.setMemory(true)
	c.setNodeStatus(ctx, node)
	r := condition(node, v1.NodeReady)
	if r.Status != v1.ConditionFalse || r.Reason != "KubeletNotReady" || r.Message != "container runtime is down" {
		t.Errorf("ready = %+v", r)
	}
	if !r.LastTransitionTime.Time.Equal(clk.Now()) {
		t.Errorf("ready transition = %v, want %v", r.LastTransitionTime, clk.Now())
	}
	m := condition(node, v1.NodeMemoryPressure)
	if m.Status != v1.ConditionTrue || m.Reason != "KubeletHasInsufficientMemory" ||
		m.Message != "kubelet has insufficient memory available" {
		t.Errorf("memory pressure = %+v", m)
	}
	checkEvents(t, rec, []string{"Normal NodeHasInsufficientMemory", "Normal NodeNotReady"})

	// 4. Recovery: Ready True again; memory pressure ends when the eviction
	// manager says so.
	clk.Step(10 * time.Second)
	ready.set(nil)
	c.setNodeStatus(ctx, node)
	if r := condition(node, v1.NodeReady); r.Status != v1.ConditionTrue || !r.LastTransitionTime.Time.Equal(clk.Now()) {
		t.Errorf("ready after recovery = %+v", r)
	}
	if m := condition(node, v1.NodeMemoryPressure); m.Status != v1.ConditionTrue {
		t.Errorf("memory pressure dropped while reported: %+v", m)
	}
	clk.Step(10 * time.Second)
	h.setMemory(false)
	c.setNodeStatus(ctx, node)
	if m := condition(node, v1.NodeMemoryPressure); m.Status != v1.ConditionFalse || m.Reason != "KubeletHasSufficientMemory" {
		t.Errorf("memory pressure after the transition period = %+v", m)
	}
	checkEvents(t, rec, []string{"Normal NodeReady", "Normal NodeHasSufficientMemory"})
}

// checkEvents fails unless the events recorded since the last check are, by
// "type reason", exactly want (in any order).
func checkEvents(t *testing.T, rec *record.FakeRecorder, want []string) {
	t.Helper()
	var got []string
	for _, e := range drainEvents(rec) {
		f := strings.Fields(e)
		if len(f) >= 2 {
			got = append(got, f[0]+" "+f[1])
		}
	}
	want = slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

func TestReadyMissingCapacity(t *testing.T) {
	t.Parallel()
	m := testMachine()
	m.RootFsCapacity = 0 // statfs failed
	c, _, _, _, _ := testController(t, Options{Resources: testResources(t, resources.Options{Machine: m})})
	node := &v1.Node{}
	c.setNodeStatus(context.Background(), node)
	r := condition(node, v1.NodeReady)
	if r.Status != v1.ConditionFalse || r.Reason != "KubeletNotReady" ||
		r.Message != "missing node capacity for resources: ephemeral-storage" {
		t.Errorf("ready = %+v", r)
	}

	ready := &readiness{err: errors.New("network not ready")}
	c.opts.Readiness = ready.get
	c.setNodeStatus(context.Background(), node)
	r = condition(node, v1.NodeReady)
	if !strings.Contains(r.Message, "network not ready") || !strings.Contains(r.Message, "ephemeral-storage") {
		t.Errorf("ready message = %q, want both errors", r.Message)
	}
}

// fakeImages is the image manager's list.
type fakeImages struct{ list []v1.ContainerImage }

func (f fakeImages) NodeImages(max int) []v1.ContainerImage {
	if max >= 0 && len(f.list) > max {
		return f.list[:max]
	}
	return f.list
}

func TestImagesSetter(t *testing.T) {
	t.Parallel()
	list := []v1.ContainerImage{{Names: []string{"big:1"}, SizeBytes: 3}, {Names: []string{"small:1"}, SizeBytes: 1}}
	c, _, _, _, _ := testController(t, Options{Images: fakeImages{list: list}, MaxImages: 1})
	node := &v1.Node{}
	c.setNodeStatus(context.Background(), node)
	if len(node.Status.Images) != 1 || node.Status.Images[0].Names[0] != "big:1" {
		t.Errorf("images = %+v, want the largest one only", node.Status.Images)
	}
}

// The declared features go to status.declaredFeatures as given; none given
// leaves the field alone.
func TestDeclaredFeatures(t *testing.T) {
	t.Parallel()
	declared := []string{"ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling"}
	c, _, _, _, _ := testController(t, Options{DeclaredFeatures: declared})
	node := &v1.Node{}
	c.setNodeStatus(context.Background(), node)
	if !slices.Equal(node.Status.DeclaredFeatures, declared) {
		t.Errorf("declaredFeatures = %v, want %v", node.Status.DeclaredFeatures, declared)
	}
	node.Status.DeclaredFeatures[0] = "changed"
	if c.opts.DeclaredFeatures[0] != "ExtendWebSocketsToKubelet" {
		t.Error("the node shares the controller's list")
	}
	none, _, _, _, _ := testController(t, Options{})
	node = &v1.Node{Status: v1.NodeStatus{DeclaredFeatures: []string{"Kept"}}}
	none.setNodeStatus(context.Background(), node)
	if !slices.Equal(node.Status.DeclaredFeatures, []string{"Kept"}) {
		t.Errorf("declaredFeatures = %v, want it left alone", node.Status.DeclaredFeatures)
	}
}

// fakeHandlers is the runtime state's handlers and features.
type fakeHandlers struct {
	handlers []v1.NodeRuntimeHandler
	features *v1.NodeFeatures
}

func (f fakeHandlers) RuntimeHandlers() []v1.NodeRuntimeHandler { return f.handlers }
func (f fakeHandlers) RuntimeFeatures() *v1.NodeFeatures        { return f.features }

// The runtime's handlers and features go to status.runtimeHandlers and
// status.features (copies); none known yet gives no handlers and leaves the
// features alone.
func TestRuntimeHandlersSetter(t *testing.T) {
	t.Parallel()
	yes, no := true, false
	rh := fakeHandlers{handlers: []v1.NodeRuntimeHandler{
		{Name: "", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &no, UserNamespaces: &no}},
		{Name: "crun", Features: &v1.NodeRuntimeHandlerFeatures{RecursiveReadOnlyMounts: &no, UserNamespaces: &no}},
	}, features: &v1.NodeFeatures{SupplementalGroupsPolicy: &yes}}
	c, _, _, _, _ := testController(t, Options{RuntimeHandlers: rh})
	node := &v1.Node{}
	c.setNodeStatus(context.Background(), node)
	if len(node.Status.RuntimeHandlers) != 2 || node.Status.RuntimeHandlers[1].Name != "crun" ||
		node.Status.Features == nil || !*node.Status.Features.SupplementalGroupsPolicy {
		t.Fatalf("runtimeHandlers %+v, features %+v", node.Status.RuntimeHandlers, node.Status.Features)
	}
	*node.Status.RuntimeHandlers[0].Features.UserNamespaces = true
	if no {
		t.Error("the node shares the runtime state's handlers")
	}
	none, _, _, _, _ := testController(t, Options{RuntimeHandlers: fakeHandlers{}})
	node = &v1.Node{}
	none.setNodeStatus(context.Background(), node)
	if len(node.Status.RuntimeHandlers) != 0 || node.Status.Features != nil {
		t.Errorf("before the runtime was ready: runtimeHandlers %+v, features %+v", node.Status.RuntimeHandlers, node.Status.Features)
	}
}
