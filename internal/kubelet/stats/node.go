package stats

import (
	"context"
	"errors"
	"fmt"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// NodeStats is the node's part of a full Summary (memory, CPU, filesystem,
// rlimit, system containers, the runtime's image filesystem) without the
// pods: what the eviction signals read every interval, at a fraction of a
// Summary's cost.
func (p *Provider) NodeStats(ctx context.Context) (*statsapi.NodeStats, error) {
	var (
		node            statsapi.NodeStats
		imageFs         *statsapi.FsStats
		nodeErr, imgErr error
	)
	p.together(
		func() { node, _, nodeErr = p.nodeStats(ctx, true) },
		func() { imageFs, imgErr = p.ImageFsStats(ctx) },
	)
	if err := errors.Join(nodeErr, imgErr); err != nil {
		return nil, err
	}
	node.Runtime = &statsapi.RuntimeStats{ImageFs: imageFs, ContainerFs: imageFs}
	return &node, nil
}

// HasDedicatedImageFs reports whether the runtime's image filesystem is
// another filesystem (device) than the one of the root dir, as upstream's
// stats provider.
func (p *Provider) HasDedicatedImageFs(ctx context.Context) (bool, error) {
	resp, err := p.images.ImageFsInfo(ctx)
	if err != nil {
		return false, fmt.Errorf("image filesystem info: %w", err)
	}
	fss := resp.GetImageFilesystems()
	if len(fss) == 0 || fss[0].GetFsId().GetMountpoint() == "" {
		return false, errors.New("image filesystem information is unavailable")
	}
	imageDev, err := deviceOf(fss[0].GetFsId().GetMountpoint())
	if err != nil {
		return false, err
	}
	rootDev, err := deviceOf(p.rootDir)
	if err != nil {
		return false, err
	}
	return imageDev != rootDev, nil
}
