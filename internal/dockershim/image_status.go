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
	ii, err := s.docker.InspectImage(ctx, ref)
	switch {
	case imageNotFound(err):
		return ii, false, nil
	case err != nil:
		return ii, false, fmt.Errorf("%s %q: %w", op, ref, err)
	}
	return ii, true, nil
}
