package dockershim

import (
	"context"
	"encoding/json"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// ImageStatus reports one image. An unknown image is not an error: the response then
// has no image, as the CRI requires. Verbose adds Info["info"], a JSON object with the
// image's OCI-style spec (imageSpec) and Docker's storage facts.
func (s *Service) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	ii, found, err := s.inspectImageRef(ctx, "image status", req.GetImage())
	if err != nil || !found {
		return &runtimeapi.ImageStatusResponse{}, err
	}
	u := imageUserOf(ii)
	s.stats.imageUsers.put(ii.ID, u)
	resp := &runtimeapi.ImageStatusResponse{
		Image: s.criImage(ii.ID, cleanRepoTags(ii.RepoTags), cleanRepoDigests(ii.RepoDigests), ii.Size, u),
	}
	if req.GetVerbose() {
		info, err := imageVerboseInfo(ii)
		if err != nil {
			return nil, err
		}
		resp.Info = map[string]string{"info": info}
	}
	return resp, nil
}

// imageVerboseInfo is the verbose "info" JSON, shaped like containerd's: the image spec
// (created, author, platform, config, rootfs) plus Docker's ID, size and graph driver.
func imageVerboseInfo(ii libdocker.ImageInspect) (string, error) {
	spec := map[string]any{
		"created":      ii.Created,
		"author":       ii.Author,
		"architecture": ii.Architecture,
		"os":           ii.Os,
		"config":       ii.Config,
		"rootfs":       ii.RootFS,
	}
	if ii.Variant != "" {
		spec["variant"] = ii.Variant
	}
	b, err := json.Marshal(map[string]any{
		"id":          ii.ID,
		"repoTags":    ii.RepoTags,
		"repoDigests": ii.RepoDigests,
		"size":        ii.Size,
		"imageSpec":   spec,
		"graphDriver": ii.GraphDriver,
	})
	if err != nil {
		return "", fmt.Errorf("encode image info: %w", err)
	}
	return string(b), nil
}

// inspectImageRef inspects the image a CRI ImageSpec names: an empty reference is
// InvalidArgument, an unknown image is found=false without an error.
func (s *Service) inspectImageRef(ctx context.Context, op string, spec *runtimeapi.ImageSpec) (libdocker.ImageInspect, bool, error) {
	ref := spec.GetImage()
	if ref == "" {
		return libdocker.ImageInspect{}, false, invalidArg("image.image", "must not be empty")
	}
	ii, found, err := s.lookupImage(ctx, ref)
	if err != nil {
		return ii, false, fmt.Errorf("%s %q: %w", op, ref, err)
	}
	return ii, found, nil
}

// lookupImage inspects the image ref names; found is false when Docker does not
// know ref or resolved it to an image ref does not name. Docker resolves a
// reference it has no tag for as an image ID prefix ("sha256:3f5e" is not the
// repository "sha256" but any image whose ID starts with 3f5e): only the image's
// full ID, one of its tags or one of its digests is accepted (imageMatches), so
// that no image RPC reaches an image by a guessed prefix.
func (s *Service) lookupImage(ctx context.Context, ref string) (libdocker.ImageInspect, bool, error) {
	ii, err := s.docker.InspectImage(ctx, ref)
	switch {
	case imageNotFound(err):
		return libdocker.ImageInspect{}, false, nil
	case err != nil:
		return libdocker.ImageInspect{}, false, err
	case !imageMatches(ref, ii.ID, cleanRepoTags(ii.RepoTags), cleanRepoDigests(ii.RepoDigests)):
		return libdocker.ImageInspect{}, false, nil
	}
	return ii, true, nil
}
