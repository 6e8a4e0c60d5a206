package images

import (
	"cmp"
	"context"
	"slices"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxNamesPerImage caps the names of one node.status.images entry, as
// upstream's MaxNamesPerImageInNodeStatus.
const maxNamesPerImage = 5

// cachedImage is one entry of the image list behind NodeImages.
type cachedImage struct {
	id    string
	size  int64
	names []string // RepoDigests then RepoTags, at most maxNamesPerImage
}

// refreshCache lists the images and replaces the cached list, sorted by size
// descending, ties by ID descending (upstream's sliceutils.ByImageSize).
func (m *Manager) refreshCache(ctx context.Context) {
	imgs, err := m.images.ListImages(ctx, nil)
	if err != nil {
		m.logger.Info("Failed to update image list", zap.Error(err))
		return
	}
	m.setCache(imgs)
}

// setCache converts, sorts and stores imgs.
func (m *Manager) setCache(imgs []*runtimeapi.Image) {
	list := make([]cachedImage, 0, len(imgs))
	for _, img := range imgs {
		names := make([]string, 0, len(img.GetRepoDigests())+len(img.GetRepoTags()))
		names = append(names, img.GetRepoDigests()...)
		names = append(names, img.GetRepoTags()...)
		if len(names) > maxNamesPerImage {
			names = names[:maxNamesPerImage]
		}
		list = append(list, cachedImage{id: img.GetId(), size: int64(img.GetSize()), names: names})
	}
	slices.SortFunc(list, func(a, b cachedImage) int {
		return cmp.Or(cmp.Compare(b.size, a.size), cmp.Compare(b.id, a.id))
	})
	m.cacheMu.Lock()
	m.cache = list
	m.cacheMu.Unlock()
}

// NodeImages returns node.status.images from the cached image list: largest
// first (ties by image ID descending), at most maxImages entries (negative =
// all), each named by its RepoDigests then RepoTags, at most five names. It
// is nil before the first refresh or when there are no images.
func (m *Manager) NodeImages(maxImages int) []v1.ContainerImage {
	m.cacheMu.Lock()
	list := m.cache
	m.cacheMu.Unlock()
	if maxImages >= 0 && maxImages < len(list) {
		list = list[:maxImages]
	}
	var out []v1.ContainerImage
	for _, img := range list {
		out = append(out, v1.ContainerImage{Names: slices.Clone(img.names), SizeBytes: img.size})
	}
	return out
}
