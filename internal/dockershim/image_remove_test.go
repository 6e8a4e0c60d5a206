package dockershim

import (
	"errors"
	"fmt"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

func TestImageRemoveRefIsID(t *testing.T) {
	t.Parallel()
	ii := libdocker.ImageInspect{ID: imageTestID, RepoTags: []string{"busybox:latest"}, RepoDigests: []string{"busybox@sha256:1111"}}
	for _, tc := range []struct {
		desc string
		ref  string
		want bool
	}{
		{"full ID", imageTestID, true},
		{"bare hex", imageTestID[7:], true},
		{"short prefix Docker resolved", "6f98", true},
		{"tag", "busybox", false},
		{"digest", "busybox@sha256:1111", false},
		{"not hex", "6f98x", false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := removeRefIsID(tc.ref, ii); got != tc.want {
				t.Errorf("removeRefIsID(%q) = %v, want %v", tc.ref, got, tc.want)
			}
		})
	}
}

func TestImageRemoveLostRace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		err  error
		want bool
	}{
		{"not found", fmt.Errorf("docker remove image x: %w", libdocker.ErrNotFound), true},
		{"conflict no such image", fmt.Errorf("%w: Error response from daemon: No such image: sha256:abc", libdocker.ErrConflict), true},
		{"unrecognized ID", errors.New("Error response from daemon: unrecognized image ID sha256:abc"), true},
		{"reference gone", errors.New("Error response from daemon: reference does not exist"), true},
		{"in use", fmt.Errorf("%w: image is being used by running container abc", libdocker.ErrConflict), false},
		{"other", errors.New("boom"), false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := imageRemoveLostRace(tc.err); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
