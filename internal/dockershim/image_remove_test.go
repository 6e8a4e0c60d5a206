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
		{"short prefix is not the ID", "6f98", false},
		{"sha256 prefix is not the ID", "sha256:6f98d68ba735", false},
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

// TestImageRemoveTarget: only the full ID removes the image by ID (forced); a
// tag or digest is removed fully qualified, which Docker never reads as an ID
// prefix, even for a tag that looks like one.
func TestImageRemoveTarget(t *testing.T) {
	t.Parallel()
	ii := libdocker.ImageInspect{ID: imageTestID, RepoTags: []string{"6f98:latest"}}
	for _, tc := range []struct {
		desc, ref, want string
		force           bool
	}{
		{"full ID", imageTestID, imageTestID, true},
		{"bare hex ID", imageTestID[7:], imageTestID, true},
		{"hex-looking tag", "6f98", "docker.io/library/6f98:latest", false},
		{"registry tag", "127.0.0.1:5000/app:v1", "127.0.0.1:5000/app:v1", false},
		{"digest", "busybox@sha256:1111", "docker.io/library/busybox@sha256:1111", false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got, force := removeTarget(tc.ref, ii); got != tc.want || force != tc.force {
				t.Errorf("removeTarget(%q) = %q, %v; want %q, %v", tc.ref, got, force, tc.want, tc.force)
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
