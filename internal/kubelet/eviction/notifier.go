package eviction

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.uber.org/zap"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// notifierRefreshInterval is how often the memcg thresholds are re-armed
// from the latest sample (upstream's).
const notifierRefreshInterval = 10 * time.Second

// notifierSet holds the armed memory cgroup threshold notifications
// (kernelMemcgNotification): one per memory threshold, on the root memory
// cgroup for memory.available and on the pods cgroup for
// allocatableMemory.available. A notification wakes the manager at once.
type notifierSet struct {
	armed       []*memcgNotifier
	wg          sync.WaitGroup
	cancel      context.CancelFunc
	lastRefresh time.Time
	disabled    bool
}

// refresh re-arms the notifications from the manager's last node sample,
// when notifierRefreshInterval has passed.
func (s *notifierSet) refresh(ctx context.Context, m *Manager) {
	now := m.clock.Now()
	if s.disabled || now.Sub(s.lastRefresh) < notifierRefreshInterval {
		return
	}
	m.mu.RLock()
	node := m.lastNode
	m.mu.RUnlock()
	if node == nil {
		return
	}
	s.close()
	s.lastRefresh = now
	runCtx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	for _, t := range m.opts.Thresholds {
		var cgroup string
		var mem *statsapi.MemoryStats
		var hugePages int64
		switch t.Signal {
		case resources.SignalMemoryAvailable:
			cgroup, mem, hugePages = "/", node.Memory, m.opts.HugePagesBytes
		case resources.SignalAllocatableMemoryAvailable:
			cgroup, mem = m.opts.PodsCgroup, podsMemory(node)
		default:
			continue
		}
		trigger, ok := usageTrigger(t, mem, hugePages)
		if !ok || cgroup == "" {
			continue
		}
		n, err := newMemcgNotifier(cgroup, trigger)
		if errors.Is(err, cgroups.ErrMemcgNotificationUnsupported) {
			m.log.Info("Eviction manager: kernel memcg notification is not supported on this host; relying on the monitoring interval", zap.Error(err))
			s.disabled = true
			return
		}
		if err != nil {
			m.log.Warn("Eviction manager: arm the memcg threshold notification", zap.String("signal", t.Signal), zap.Error(err))
			continue
		}
		s.armed = append(s.armed, n)
		desc := describeNotifier(t)
		s.wg.Go(func() {
			defer logging.HandleCrash(m.log, "memcg notification")
			n.Run(runCtx, func() {
				m.log.Info("eviction manager: " + desc + " crossed")
				select {
				case m.wake <- struct{}{}:
				default:
				}
			})
		})
	}
}

// close disarms every notification and waits for their goroutines.
func (s *notifierSet) close() {
	if s.cancel != nil {
		s.cancel()
	}
	for _, n := range s.armed {
		_ = n.Close()
	}
	s.wg.Wait()
	s.armed, s.cancel = nil, nil
}

// usageTrigger is the memory usage at which threshold t is crossed: the
// capacity less the threshold, plus what the working set leaves out of
// usage (inactive file pages), as upstream's memory threshold notifier.
func usageTrigger(t Threshold, mem *statsapi.MemoryStats, hugePages int64) (int64, bool) {
	if mem == nil || mem.AvailableBytes == nil || mem.WorkingSetBytes == nil || mem.UsageBytes == nil {
		return 0, false
	}
	ws := int64(*mem.WorkingSetBytes)
	capacity := max(int64(*mem.AvailableBytes)-hugePages, 0) + ws
	trigger := capacity - t.Value(capacity) + (int64(*mem.UsageBytes) - ws)
	return trigger, trigger > 0
}

func describeNotifier(t Threshold) string {
	d := "soft "
	if t.hard() {
		d = "hard "
	}
	if t.Signal == resources.SignalAllocatableMemoryAvailable {
		d += "allocatable "
	}
	return d + "memory eviction threshold"
}
