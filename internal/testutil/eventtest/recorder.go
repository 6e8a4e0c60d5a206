// Package eventtest is a record.EventRecorder for tests: it keeps every event
// it is given, in order, for the test to read back.
package eventtest

import (
	"fmt"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// Event is one recorded event.
type Event struct {
	Object      runtime.Object
	Annotations map[string]string
	Type        string
	Reason      string
	Message     string
}

// String renders the event as "<type> <reason> <message>", as client-go's
// FakeRecorder does.
func (e Event) String() string { return e.Type + " " + e.Reason + " " + e.Message }

// Pod is the event's object as a pod, or nil.
func (e Event) Pod() *v1.Pod {
	p, _ := e.Object.(*v1.Pod)
	return p
}

// Recorder keeps events; the zero value is ready. It is safe for concurrent
// use.
type Recorder struct {
	mu     sync.Mutex
	events []Event
}

var _ record.EventRecorder = (*Recorder)(nil)

// Event records an event.
func (r *Recorder) Event(object runtime.Object, eventType, reason, message string) {
	r.add(Event{Object: object, Type: eventType, Reason: reason, Message: message})
}

// Eventf records an event with a formatted message.
func (r *Recorder) Eventf(object runtime.Object, eventType, reason, format string, args ...any) {
	r.add(Event{Object: object, Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

// AnnotatedEventf records an event with annotations and a formatted message.
func (r *Recorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventType, reason, format string, args ...any) {
	r.add(Event{Object: object, Annotations: annotations, Type: eventType, Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (r *Recorder) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// Events returns a copy of the events recorded so far.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Strings returns the events recorded so far as Event.String renders them.
func (r *Recorder) Strings() []string {
	events := r.Events()
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.String()
	}
	return out
}

// About returns the events recorded so far, failing the test for each one
// whose object is not obj (the same pointer).
func (r *Recorder) About(t testing.TB, obj runtime.Object) []Event {
	t.Helper()
	events := r.Events()
	for _, e := range events {
		if e.Object != obj {
			t.Errorf("event %q is about %v, want %v", e, e.Object, obj)
		}
	}
	return events
}
