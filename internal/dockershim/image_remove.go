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
// is losing a race to a concurrent removal. A reference naming the full image ID (as
// the kubelet's image GC does) deletes the image with all its tags (Docker needs force
// for an image tagged in several repositories; it still refuses when a running
// container uses it). A tag or digest reference removes that reference only, which
// deletes the image when it was the last one. An ID prefix names no image (see
// lookupImage): it removes nothing.
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
	target, force := removeTarget(ref, ii)
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

// removeTarget is what Docker is asked to remove for ref, which names the inspected
// image: the image ID, forced, for its full ID; otherwise the tag or digest, fully
// qualified ("docker.io/library/3f5e:latest", not "3f5e"), so that Docker cannot
// fall back to an ID prefix should the tag vanish before the removal.
func removeTarget(ref string, ii libdocker.ImageInspect) (target string, force bool) {
	if removeRefIsID(ref, ii) {
		return ii.ID, true
	}
	return parseImageRef(ref).String(), false
}

// removeRefIsID reports whether ref named the inspected image by its full ID rather
// than by one of its references.
func removeRefIsID(ref string, ii libdocker.ImageInspect) bool {
	return imageIDMatches(ref, ii.ID)
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
