package container

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// NodeEvents returns a function recording events about the node ref names
// with rec (the managers that report on the node itself: cm, images,
// eviction, nodeshutdown). With either nil, events are dropped.
func NodeEvents(rec record.EventRecorder, ref *v1.ObjectReference) func(eventType, reason, message string) {
	if rec == nil || ref == nil {
		return func(string, string, string) {}
	}
	return func(eventType, reason, message string) { rec.Event(ref, eventType, reason, message) }
}

// NopRecorder drops every event: the recorder of a part given none.
type NopRecorder struct{}

func (NopRecorder) Event(runtime.Object, string, string, string)          {}
func (NopRecorder) Eventf(runtime.Object, string, string, string, ...any) {}
func (NopRecorder) AnnotatedEventf(runtime.Object, map[string]string, string, string, string, ...any) {
}

var _ record.EventRecorder = NopRecorder{}
