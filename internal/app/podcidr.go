package app

import (
	"context"
	"fmt"
	"sync"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runtimeConfigUpdater is the CRI call that hands the runtime its pod CIDR.
type runtimeConfigUpdater interface {
	UpdateRuntimeConfig(ctx context.Context, runtimeConfig *runtimeapi.RuntimeConfig) error
}

// podCIDR keeps the pod CIDR the runtime was last given (--pod-cidr of a
// standalone node, then the node's spec.podCIDRs), as upstream's
// updatePodCIDR: the runtime hears of a change once.
type podCIDR struct {
	rt     runtimeConfigUpdater
	logger *zap.Logger
	mu     sync.Mutex
	cur    string
}

// update hands cidr to the runtime when it differs from the last one, and
// reports whether it did. A failed call still counts as a change, as
// upstream's.
func (p *podCIDR) update(ctx context.Context, cidr string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cidr == p.cur {
		return false, nil
	}
	cfg := &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}}
	if err := p.rt.UpdateRuntimeConfig(ctx, cfg); err != nil {
		return true, fmt.Errorf("failed to update pod CIDR: %w", err)
	}
	p.logger.Info("Updating Pod CIDR", zap.String("originalPodCIDR", p.cur), zap.String("newPodCIDR", cidr))
	p.cur = cidr
	return true, nil
}
