package dockershim

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// Images are reported with Docker's image ID ("sha256:...") as their CRI ID, and the
// repo tags and digests Docker shows (its short "familiar" form for Docker Hub names).
// References from clients are normalised (docker.io/library/, :latest) before they are
// compared with them.

// ListImages lists the images (not intermediate layers), optionally only those a
// reference names (tag, digest or full ID; never an ID prefix).
func (s *Service) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	images, err := s.listImages(ctx, req.GetFilter())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ListImagesResponse{Images: images}, nil
}

// StreamImages is ListImages sent in chunks.
func (s *Service) StreamImages(req *runtimeapi.StreamImagesRequest, stream runtimeapi.ImageService_StreamImagesServer) error {
	images, err := s.listImages(stream.Context(), req.GetFilter())
	if err != nil {
		return err
	}
	for _, part := range chunks(images, streamChunk) {
		if err := stream.Send(&runtimeapi.StreamImagesResponse{Images: part}); err != nil {
			return fmt.Errorf("send images: %w", err)
		}
	}
	return nil
}

func (s *Service) listImages(ctx context.Context, f *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	list, err := s.docker.ListImages(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	ref := f.GetImage().GetImage()
	out := make([]*runtimeapi.Image, 0, len(list))
	ids := make(map[string]bool, len(list))
	for i := range list {
		img := &list[i]
		ids[img.ID] = true
		tags, digests := cleanRepoTags(img.RepoTags), cleanRepoDigests(img.RepoDigests)
		if ref != "" && !imageMatches(ref, img.ID, tags, digests) {
			continue
		}
		u, ok := s.imageUser(ctx, img.ID)
		if !ok {
			continue // removed meanwhile
		}
		out = append(out, s.criImage(img.ID, tags, digests, img.Size, u))
	}
	if ref == "" {
		s.stats.imageUsers.retain(ids)
	}
	return out, nil
}

// criImage builds a CRI image. The sandbox (pause) image is pinned, so that
// the kubelet's image GC never removes it (as containerd pins its sandbox
// image).
func (s *Service) criImage(id string, tags, digests []string, size int64, u imageUser) *runtimeapi.Image {
	img := &runtimeapi.Image{
		Id:          id,
		RepoTags:    tags,
		RepoDigests: digests,
		Spec:        &runtimeapi.ImageSpec{Image: id},
		Username:    u.name,
		Pinned:      imageMatches(s.podInfraImage, id, tags, digests),
	}
	if size > 0 {
		img.Size = uint64(size)
	}
	if u.hasUID {
		img.Uid = &runtimeapi.Int64Value{Value: u.uid}
	}
	return img
}

// cleanRepoTags drops the "<none>:<none>" placeholder of untagged images.
func cleanRepoTags(tags []string) []string {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		if t != "<none>:<none>" && t != "" {
			out = append(out, t)
		}
	}
	return out
}

// cleanRepoDigests drops the "<none>@<none>" placeholder.
func cleanRepoDigests(digests []string) []string {
	out := make([]string, 0, len(digests))
	for _, d := range digests {
		if d != "<none>@<none>" && d != "" {
			out = append(out, d)
		}
	}
	return out
}

// imageUser is the user an image runs as: a UID, or a name.
type imageUser struct {
	uid    int64
	hasUID bool
	name   string
}

// parseImageUser reads an image config's User: "1000", "1000:1000", "nobody",
// "nobody:nogroup" or "" (root by default).
func parseImageUser(user string) imageUser {
	u, _, _ := strings.Cut(user, ":")
	if u == "" {
		return imageUser{}
	}
	if n, err := strconv.ParseInt(u, 10, 64); err == nil && n >= 0 {
		return imageUser{uid: n, hasUID: true}
	}
	return imageUser{name: u}
}

// imageUserCache remembers image users by image ID (image configs are immutable).
type imageUserCache struct {
	mu    sync.Mutex
	users map[string]imageUser
}

func (c *imageUserCache) get(id string) (imageUser, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	u, ok := c.users[id]
	return u, ok
}

func (c *imageUserCache) put(id string, u imageUser) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.users[id] = u
}

// retain forgets images that no longer exist.
func (c *imageUserCache) retain(ids map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.users {
		if !ids[id] {
			delete(c.users, id)
		}
	}
}

// imageUser returns an image's user, inspecting it once; ok is false when the image
// vanished. Other inspect errors give an unknown user.
func (s *Service) imageUser(ctx context.Context, id string) (imageUser, bool) {
	if u, ok := s.stats.imageUsers.get(id); ok {
		return u, true
	}
	ii, err := s.docker.InspectImage(ctx, id)
	if err != nil {
		return imageUser{}, !imageNotFound(err)
	}
	u := imageUserOf(ii)
	s.stats.imageUsers.put(id, u)
	return u, true
}

// imageNotFound reports whether a Docker error says the image does not exist.
func imageNotFound(err error) bool { return errors.Is(err, libdocker.ErrNotFound) }

func imageUserOf(ii libdocker.ImageInspect) imageUser {
	if ii.Config == nil {
		return imageUser{}
	}
	return parseImageUser(ii.Config.User)
}

// imageRef is a parsed image reference: domain/path, tag and digest.
type imageRef struct {
	name   string // fully qualified: docker.io/library/busybox
	tag    string
	digest string
}

// parseImageRef normalises a reference the way Docker does: a first component without
// "." or ":" (and not "localhost") is a Docker Hub path, one-component Hub paths get
// "library/", and a reference without tag or digest means ":latest".
func parseImageRef(ref string) imageRef {
	var r imageRef
	name := ref
	if n, d, ok := strings.Cut(ref, "@"); ok {
		name, r.digest = n, d
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name, r.tag = name[:i], name[i+1:]
	}
	if r.tag == "" && r.digest == "" {
		r.tag = "latest"
	}
	domain, rest, ok := strings.Cut(name, "/")
	if !ok || !strings.ContainsAny(domain, ".:") && domain != "localhost" {
		domain, rest = "docker.io", name
	}
	if domain == "index.docker.io" {
		domain = "docker.io"
	}
	if domain == "docker.io" && !strings.Contains(rest, "/") {
		rest = "library/" + rest
	}
	r.name = domain + "/" + rest
	return r
}

// String is the normalised reference with its tag and/or digest: "docker.io/library/busybox:latest".
func (r imageRef) String() string {
	s := r.name
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

// imageMatches reports whether ref names the image: its full ID (with or without
// "sha256:"), one of its tags or one of its digests. An ID prefix names nothing.
func imageMatches(ref, id string, tags, digests []string) bool {
	if imageIDMatches(ref, id) {
		return true
	}
	want := parseImageRef(ref)
	if want.digest != "" {
		for _, d := range digests {
			if got := parseImageRef(d); got.name == want.name && got.digest == want.digest {
				return true
			}
		}
		return false
	}
	for _, t := range tags {
		if got := parseImageRef(t); got.name == want.name && got.tag == want.tag {
			return true
		}
	}
	return false
}

// imageIDMatches reports whether ref is the full image ID id ("sha256:<64 hex>"),
// with or without its "sha256:". Docker also takes a prefix of an ID ("sha256:3f5e",
// "3f5e") for the image, but a prefix names whatever local image starts so: a pod
// could run another tenant's image by guessing a few hex digits. Like the 1.23
// dockershim and cri-dockerd, the shim accepts only the whole ID.
func imageIDMatches(ref, id string) bool {
	return ref != "" && id != "" && (ref == id || "sha256:"+ref == id)
}
