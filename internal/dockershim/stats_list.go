package dockershim

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// The list stats RPCs take their targets from the stats index (stats_index.go), not
// from a Docker list per request, and read each target's cgroup once per request.

func (s *Service) listContainerStats(ctx context.Context, f *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	defer s.stats.prune()
	all, err := s.statsTargets(ctx)
	if err != nil {
		return nil, err
	}
	var targets []statsTarget
	for _, t := range all {
		if t.typ == typeContainer && t.running && containerStatsMatch(t, f) {
			targets = append(targets, t)
		}
	}
	stats, _ := s.containerStatsAll(ctx, targets, true)
	return stats, nil
}

// containerStatsMatch applies a ContainerStatsFilter to a container.
func containerStatsMatch(t statsTarget, f *runtimeapi.ContainerStatsFilter) bool {
	if f == nil {
		return true
	}
	if f.GetId() != "" && !strings.HasPrefix(t.id, f.GetId()) {
		return false
	}
	if f.GetPodSandboxId() != "" && !strings.HasPrefix(t.labels[labelSandboxID], f.GetPodSandboxId()) {
		return false
	}
	labels, _ := splitLabels(t.labels)
	return matchLabels(f.GetLabelSelector(), labels)
}

// containerStatsAll computes stats of many containers, on up to statsParallelism
// goroutines when parallel is set. Those that vanished meanwhile are left out (a
// cgroup found gone also makes the next request list again). samples[i] belongs to
// stats[i].
func (s *Service) containerStatsAll(ctx context.Context, targets []statsTarget, parallel bool) ([]*runtimeapi.ContainerStats, []usageSample) {
	type result struct {
		st  *runtimeapi.ContainerStats
		smp usageSample
	}
	results := make([]result, len(targets))
	one := func(i int) {
		st, smp, err := s.containerStatsOf(ctx, targets[i])
		if err != nil {
			if errors.Is(err, errCgroupGone) {
				s.stats.index.invalidate()
			}
			s.logger.Debug("container stats", zap.String("id", targets[i].id), zap.Error(err))
			return
		}
		results[i] = result{st, smp}
	}
	if parallel {
		s.statsForEach(len(targets), one)
	} else {
		for i := range targets {
			one(i)
		}
	}
	stats := make([]*runtimeapi.ContainerStats, 0, len(targets))
	samples := make([]usageSample, 0, len(targets))
	for _, r := range results {
		if r.st != nil {
			stats = append(stats, r.st)
			samples = append(samples, r.smp)
		}
	}
	return stats, samples
}

// statsForEach runs fn(0..n-1) on up to statsParallelism goroutines and waits.
func (s *Service) statsForEach(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, statsParallelism) {
		wg.Go(func() {
			defer logging.HandleCrash(s.logger, "stats")
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				fn(i)
			}
		})
	}
	wg.Wait()
}
