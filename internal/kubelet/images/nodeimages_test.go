package images

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestNodeImages(t *testing.T) {
	t.Parallel()
	imgs := []*runtimeapi.Image{
		{Id: "small", Size: 10, RepoTags: []string{"small:1"}},
		{Id: "tie-a", Size: 50, RepoDigests: []string{"a@sha256:1"}, RepoTags: []string{"a:1"}},
		{Id: "big", Size: 100, RepoDigests: []string{"d1", "d2", "d3"}, RepoTags: []string{"t1", "t2", "t3"}},
		{Id: "tie-b", Size: 50},
	}
	all := []v1.ContainerImage{
		{Names: []string{"d1", "d2", "d3", "t1", "t2"}, SizeBytes: 100},
		{Names: []string{}, SizeBytes: 50},                    // tie-b: ties by ID descending
		{Names: []string{"a@sha256:1", "a:1"}, SizeBytes: 50}, // tie-a
		{Names: []string{"small:1"}, SizeBytes: 10},
	}
	for _, tc := range []struct {
		desc string
		max  int
		want []v1.ContainerImage
	}{
		{"all with -1", -1, all},
		{"cap", 2, all[:2]},
		{"cap above the count", 10, all},
		{"zero", 0, nil},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, Policy{})
			e.m.setCache(imgs)
			if got := e.m.NodeImages(tc.max); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("NodeImages(%d) = %v, want %v", tc.max, got, tc.want)
			}
		})
	}

	t.Run("callers may edit the result", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Policy{})
		e.m.setCache(imgs)
		e.m.NodeImages(-1)[0].Names[0] = "changed"
		if got := e.m.NodeImages(-1)[0].Names[0]; got != "d1" {
			t.Errorf("cached name changed to %q", got)
		}
	})

	t.Run("empty before the first refresh", func(t *testing.T) {
		t.Parallel()
		e := newTestEnv(t, Policy{})
		if got := e.m.NodeImages(-1); got != nil {
			t.Errorf("NodeImages = %v, want nil", got)
		}
	})
}
