package app

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

// TestEventRecorder: every event is logged; the API server gets those about
// the node and about pods with a UID, with their annotations; an event about
// the stub of an unreadable manifest (no UID) or about a nil pod is not sent,
// and a nil pod is not even logged.
func TestEventRecorder(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.InfoLevel)
	api := &eventtest.Recorder{}
	rec := eventRecorder{conn: &apiConn{recorder: api}, logger: zap.New(core)}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-web"}}
	stub := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "/etc/kubernetes/manifests/bad.yaml"}}
	node := nodeReference("n1")

	rec.Eventf(pod, v1.EventTypeNormal, "Started", "Started container %s", "app")
	rec.Event(stub, v1.EventTypeWarning, "FailedToParseManifest", "bad")
	rec.Event((*v1.Pod)(nil), v1.EventTypeNormal, "Killing", "Stopping container app")
	rec.AnnotatedEventf(pod, map[string]string{"offending_containers": "app"}, v1.EventTypeWarning, "Evicted", "The node was low on resource: %s.", "memory")
	rec.Event(node, v1.EventTypeNormal, "NodeAllocatableEnforced", "Updated Node Allocatable limit across pods")

	sent := api.Events()
	want := []string{
		"Normal Started Started container app",
		"Warning Evicted The node was low on resource: memory.",
		"Normal NodeAllocatableEnforced Updated Node Allocatable limit across pods",
	}
	if len(sent) != len(want) {
		t.Fatalf("sent %v, want %v", api.Strings(), want)
	}
	for i, e := range sent {
		if e.String() != want[i] {
			t.Errorf("sent event %d = %q, want %q", i, e, want[i])
		}
	}
	if sent[0].Object != pod || sent[2].Object != node || sent[1].Annotations["offending_containers"] != "app" {
		t.Errorf("sent events' objects or annotations wrong: %+v", sent)
	}
	if node.Kind != "Node" || node.Name != "n1" || node.UID != "" {
		t.Errorf("node reference %+v, want Node n1 without UID", node)
	}

	entries := logs.All()
	if len(entries) != 4 {
		t.Fatalf("%d events logged, want 4 (all but the nil pod's)", len(entries))
	}
	for i, key := range []string{"pod", "pod", "pod", "node"} {
		if _, ok := entries[i].ContextMap()[key]; !ok || entries[i].Message != "event" {
			t.Errorf("log entry %d = %q %v, want an event with a %q field", i, entries[i].Message, entries[i].ContextMap(), key)
		}
	}
	if got := entries[1].ContextMap()["reason"]; got != "FailedToParseManifest" {
		t.Errorf("the manifest stub's event logged with reason %v", got)
	}
}
