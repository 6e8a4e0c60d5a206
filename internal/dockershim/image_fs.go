package dockershim

import (
	"context"
	"fmt"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// imageFsTTL is how long an ImageFsInfo answer is reused.
const imageFsTTL = 5 * time.Second

// imageFsUsage is one computed ImageFsInfo answer.
type imageFsUsage struct {
	at             time.Time
	mountpoint     string
	imageBytes     uint64
	containerBytes uint64
}

// imageFsCache keeps the last answer for imageFsTTL.
type imageFsCache struct {
	mu   sync.Mutex
	last *imageFsUsage
}

// ImageFsInfo reports the filesystem Docker keeps images and writable layers on
// (<docker root>/<storage driver>, e.g. /var/lib/docker/overlay2). Nothing is walked:
// image usage is the sum of the image sizes Docker reports (capped by the filesystem's
// used space, as shared layers count once per image), container usage the sum of the
// writable layer sizes the stats collector knows. Inodes are not counted (0).
func (s *Service) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	u, err := s.imageFsUsage(ctx)
	if err != nil {
		return nil, err
	}
	usage := func(used uint64) []*runtimeapi.FilesystemUsage {
		return []*runtimeapi.FilesystemUsage{{
			Timestamp:  u.at.UnixNano(),
			FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: u.mountpoint},
			UsedBytes:  &runtimeapi.UInt64Value{Value: used},
			InodesUsed: &runtimeapi.UInt64Value{},
		}}
	}
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems:     usage(u.imageBytes),
		ContainerFilesystems: usage(u.containerBytes),
	}, nil
}

// imageFsUsage returns the cached usage, recomputing it when older than imageFsTTL.
func (s *Service) imageFsUsage(ctx context.Context) (imageFsUsage, error) {
	c := &s.stats.imageFs
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.stats.now()
	if c.last != nil && now.Sub(c.last.at) < imageFsTTL {
		return *c.last, nil
	}
	mount, err := s.stats.imageFsMount(ctx)
	if err != nil {
		return imageFsUsage{}, fmt.Errorf("image filesystem: %w", err)
	}
	images, err := s.docker.ListImages(ctx, false)
	if err != nil {
		return imageFsUsage{}, fmt.Errorf("image filesystem: %w", err)
	}
	var total uint64
	for _, img := range images {
		if img.Size > 0 {
			total += uint64(img.Size)
		}
	}
	if used, ok := fsUsedBytes(mount); ok && total > used {
		total = used
	}
	u := imageFsUsage{at: now, mountpoint: mount, imageBytes: total, containerBytes: s.stats.writableLayersTotal()}
	c.last = &u
	return u, nil
}
