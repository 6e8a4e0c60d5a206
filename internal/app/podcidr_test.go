package app

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeConfigUpdater struct {
	calls []string
	err   error
}

func (f *fakeConfigUpdater) UpdateRuntimeConfig(_ context.Context, c *runtimeapi.RuntimeConfig) error {
	f.calls = append(f.calls, c.GetNetworkConfig().GetPodCidr())
	return f.err
}

// The runtime hears of a pod CIDR once per change.
func TestPodCIDRUpdate(t *testing.T) {
	t.Parallel()
	rt := &fakeConfigUpdater{}
	p := &podCIDR{rt: rt, logger: zap.NewNop()}
	ctx := context.Background()
	for _, step := range []struct {
		cidr    string
		changed bool
	}{{"", false}, {"10.244.1.0/24", true}, {"10.244.1.0/24", false}, {"10.244.1.0/24,fd00::/64", true}} {
		if changed, err := p.update(ctx, step.cidr); err != nil || changed != step.changed {
			t.Fatalf("update(%q) = %v, %v; want %v", step.cidr, changed, err, step.changed)
		}
	}
	if len(rt.calls) != 2 || rt.calls[1] != "10.244.1.0/24,fd00::/64" {
		t.Fatalf("calls %v", rt.calls)
	}
	rt.err = errors.New("down")
	if changed, err := p.update(ctx, "10.0.0.0/24"); err == nil || !changed {
		t.Fatalf("a failed call: %v %v", changed, err)
	}
}
