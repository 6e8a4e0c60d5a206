package pleg

import (
	"reflect"
	"testing"
)

func TestGenerateEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc     string
		old, new containerState
		want     []PodLifecycleEventType
	}{
		{desc: "unchanged running", old: stateRunning, new: stateRunning},
		{desc: "unchanged exited", old: stateExited, new: stateExited},
		{desc: "new running", old: stateNonExistent, new: stateRunning, want: []PodLifecycleEventType{ContainerStarted}},
		{desc: "created then running", old: stateUnknown, new: stateRunning, want: []PodLifecycleEventType{ContainerStarted}},
		{desc: "restarted", old: stateExited, new: stateRunning, want: []PodLifecycleEventType{ContainerStarted}},
		{desc: "exited", old: stateRunning, new: stateExited, want: []PodLifecycleEventType{ContainerDied}},
		{desc: "new exited", old: stateNonExistent, new: stateExited, want: []PodLifecycleEventType{ContainerDied}},
		{desc: "new created", old: stateNonExistent, new: stateUnknown, want: []PodLifecycleEventType{ContainerChanged}},
		{desc: "running to unknown", old: stateRunning, new: stateUnknown, want: []PodLifecycleEventType{ContainerChanged}},
		{desc: "exited then removed", old: stateExited, new: stateNonExistent, want: []PodLifecycleEventType{ContainerRemoved}},
		{desc: "running then removed", old: stateRunning, new: stateNonExistent, want: []PodLifecycleEventType{ContainerDied, ContainerRemoved}},
		{desc: "unknown then removed", old: stateUnknown, new: stateNonExistent, want: []PodLifecycleEventType{ContainerDied, ContainerRemoved}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			evs := generateEvents("uid", "cid", tc.old, tc.new)
			var got []PodLifecycleEventType
			for _, ev := range evs {
				if ev.ID != "uid" || ev.Data != "cid" {
					t.Errorf("event %+v: want ID uid and Data cid", ev)
				}
				got = append(got, ev.Type)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("events = %v, want %v", got, tc.want)
			}
		})
	}
}
