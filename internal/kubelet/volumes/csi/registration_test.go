package csi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

// TestInstallKeepsTaintsChangedMeanwhile: the node lifecycle controller
// changes the Node's taints between the registry's read and its write. The
// API server's NodeRestriction plugin refuses a node's write that changes
// taints, so the registry must send only its own change (CI saw "node ... is
// not allowed to modify taints" when it sent the whole Node back).
func TestInstallKeepsTaintsChangedMeanwhile(t *testing.T) {
	t.Parallel()
	nodesGVR := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	notReady := v1.Taint{Key: "node.kubernetes.io/not-ready", Effect: v1.TaintEffectNoSchedule}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: v1.NodeSpec{Taints: []v1.Taint{notReady}}}
	client := fake.NewClientset(node)
	tracker := client.Tracker()
	// Every read is followed by the controller removing the taint.
	client.PrependReactor("get", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := tracker.Get(nodesGVR, "", "n1")
		if err != nil {
			return true, nil, err
		}
		read := obj.(*v1.Node).DeepCopy()
		changed := read.DeepCopy()
		changed.Spec.Taints = nil
		if err := tracker.Update(nodesGVR, changed, ""); err != nil {
			return true, nil, err
		}
		return true, read, nil
	})
	// NodeRestriction: a node may not change the stored taints.
	client.PrependReactor("update", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		sent := action.(k8stesting.UpdateAction).GetObject().(*v1.Node)
		obj, err := tracker.Get(nodesGVR, "", "n1")
		if err != nil {
			return true, nil, err
		}
		if len(sent.Spec.Taints) != len(obj.(*v1.Node).Spec.Taints) {
			return true, nil, apierrors.NewForbidden(nodesGVR.GroupResource(), "n1", errNotAllowedTaints)
		}
		return false, nil, nil
	})
	r, err := NewRegistry(Options{NodeName: "n1", RootDir: t.TempDir(), Client: client})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info := &csipb.NodeGetInfoResponse{NodeId: "id-1", AccessibleTopology: &csipb.Topology{Segments: map[string]string{"zone.example.com/z": "a"}}}
	if err := r.install(ctx, "csi.example.com", info); err != nil {
		t.Fatalf("install: %v", err)
	}
	got, err := tracker.Get(nodesGVR, "", "n1")
	if err != nil {
		t.Fatal(err)
	}
	n := got.(*v1.Node)
	if a := n.Annotations[annotationNodeID]; a != `{"csi.example.com":"id-1"}` {
		t.Errorf("node ID annotation %q", a)
	}
	if l := n.Labels["zone.example.com/z"]; l != "a" {
		t.Errorf("topology label %q, want a", l)
	}
	if len(n.Spec.Taints) != 0 {
		t.Errorf("taints %v: the controller's removal was undone", n.Spec.Taints)
	}
	if err := r.uninstall(ctx, "csi.example.com"); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	got, _ = tracker.Get(nodesGVR, "", "n1")
	if a, ok := got.(*v1.Node).Annotations[annotationNodeID]; ok {
		t.Errorf("node ID annotation %q left after uninstall", a)
	}
}

var errNotAllowedTaints = errors.New(`node "n1" is not allowed to modify taints`)

// TestConcurrentInstallsKeepEachOthersID: the node ID annotation is one
// JSON value for all drivers; drivers registering at the same time (the
// plugin watcher registers each socket in its own goroutine) all end up in
// it, also when reads are slow enough for the two to overlap.
func TestConcurrentInstallsKeepEachOthersID(t *testing.T) {
	t.Parallel()
	nodesGVR := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	tracker := client.Tracker()
	client.PrependReactor("get", "nodes", func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := tracker.Get(nodesGVR, "", "n1")
		time.Sleep(20 * time.Millisecond) // the other install reads meanwhile
		return true, obj, err
	})
	r, err := NewRegistry(Options{NodeName: "n1", RootDir: t.TempDir(), Client: client})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"a.example.com", "b.example.com", "c.example.com"}
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.install(context.Background(), name, &csipb.NodeGetInfoResponse{NodeId: "id-" + name}); err != nil {
				t.Errorf("install %s: %v", name, err)
			}
		}()
	}
	wg.Wait()
	got, err := tracker.Get(nodesGVR, "", "n1")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a.example.com":"id-a.example.com","b.example.com":"id-b.example.com","c.example.com":"id-c.example.com"}`
	if a := got.(*v1.Node).Annotations[annotationNodeID]; a != want {
		t.Errorf("node ID annotation %s, want %s", a, want)
	}
}
