package dockershim

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// PullImage pulls an image, with credentials when given, and returns its image ID
// ("sha256:..."), the same ID ListImages and ImageStatus report. A reference without
// tag or digest pulls ":latest" (never all tags). The pull is cancelled when Docker
// reports no progress for the configured deadline (libdocker).
func (s *Service) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, invalidArg("image.image", "must not be empty")
	}
	auth, err := pullAuthConfig(req.GetAuth())
	if err != nil {
		return nil, err
	}
	ref = pullReference(ref)
	if err := s.docker.PullImage(ctx, ref, auth); err != nil {
		return nil, fmt.Errorf("pull image %q: %w", ref, err)
	}
	ii, found, err := s.lookupImage(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("inspect pulled image %q: %w", ref, err)
	}
	if !found {
		return nil, fmt.Errorf("%w: pulled image %q is not present", ErrNotFound, ref)
	}
	s.stats.imageUsers.put(ii.ID, imageUserOf(ii))
	return &runtimeapi.PullImageResponse{ImageRef: ii.ID}, nil
}

// pullReference adds ":latest" to a reference that has neither tag nor digest.
func pullReference(ref string) string {
	if strings.Contains(ref, "@") {
		return ref
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref
	}
	return ref + ":latest"
}

// pullAuthConfig maps CRI credentials to Docker's. The "auth" field (base64 of
// "user:password") is decoded into username and password, which Docker's daemon reads;
// explicit username/password win over it. Empty credentials give nil.
func pullAuthConfig(a *runtimeapi.AuthConfig) (*libdocker.AuthConfig, error) {
	if a == nil {
		return nil, nil
	}
	out := &libdocker.AuthConfig{
		Username:      a.GetUsername(),
		Password:      a.GetPassword(),
		ServerAddress: a.GetServerAddress(),
		IdentityToken: a.GetIdentityToken(),
		RegistryToken: a.GetRegistryToken(),
	}
	if a.GetAuth() != "" && out.Username == "" && out.Password == "" {
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(a.GetAuth()))
		if err != nil {
			return nil, invalidArg("auth.auth", "not base64: %v", err)
		}
		user, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, invalidArg("auth.auth", `must encode "user:password"`)
		}
		out.Username, out.Password = user, pass
	}
	if out.Username == "" && out.Password == "" && out.IdentityToken == "" && out.RegistryToken == "" {
		return nil, nil
	}
	return out, nil
}
