package dockershim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// RemoveImage removes an image and is idempotent: an unknown image is success, and so
// is losing a race to a concurrent removal. A reference naming the image ID (as the
// kubelet's image GC does) deletes the image with all its tags (Docker needs force for
// an image tagged in several repositories; it still refuses when a running container
// uses it). A tag or digest reference removes that reference only, which deletes the
// image when it was the last one.
func (s *Service) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref := req.GetImage().GetImage()
	ii, found, err := s.inspectImageRef(ctx, "remove image", req.GetImage())
	if err != nil || !found {
		if err != nil {
			return nil, err
		}
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	// Concurrent removals of one image wait for each other, so that none returns
	// while Docker is still deleting it (the CRI wants it gone when the call returns).
	unlock := s.imageLocks.lock(ii.ID)
	defer unlock()
	if ii, found, err = s.inspectImageRef(ctx, "remove image", req.GetImage()); err != nil || !found {
		if err != nil {
			return nil, err
		}
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	target, force := ref, false
	if removeRefIsID(ref, ii) {
		target, force = ii.ID, true
	}
	_, err = s.docker.RemoveImage(ctx, target, force)
	if err == nil || imageRemoveLostRace(err) {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	// Docker reports a lost race in several ways ("unrecognized image ID", conflicts):
	// what counts is whether the reference is gone now.
	if _, ierr := s.docker.InspectImage(ctx, target); imageNotFound(ierr) {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	if errors.Is(err, libdocker.ErrConflict) {
		return nil, fmt.Errorf("%w: remove image %q: %w", ErrFailedPrecondition, ref, err)
	}
	return nil, fmt.Errorf("remove image %q: %w", ref, err)
}

// removeRefIsID reports whether ref named the inspected image by its ID or an ID
// prefix (any length, as Docker resolved it) rather than by one of its references.
func removeRefIsID(ref string, ii libdocker.ImageInspect) bool {
	r := strings.TrimPrefix(ref, "sha256:")
	if r == "" || !isLowerHex(r) || !strings.HasPrefix(strings.TrimPrefix(ii.ID, "sha256:"), r) {
		return false
	}
	return !imageMatches(ref, "", cleanRepoTags(ii.RepoTags), cleanRepoDigests(ii.RepoDigests))
}

// imageRemoveLostRace reports whether a removal failed only because the image (or
// reference) is already gone: NotFound, or Docker's conflict/server errors saying
// "No such image" when another removal of the same image won.
func imageRemoveLostRace(err error) bool {
	if imageNotFound(err) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "no such image") || strings.Contains(msg, "reference does not exist") ||
		strings.Contains(msg, "unrecognized image id")
}
