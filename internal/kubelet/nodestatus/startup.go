package nodestatus

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// startupTracker records upstream's kubelet_node_startup_* gauges
// (pkg/kubelet/util/node_startup_latency_tracker.go): the time before the
// kubelet started (since boot), before its first registration attempt,
// registering, and from registration until the node first reported Ready.
// As upstream, the gauges are set only when this kubelet created its Node: a
// kubelet that finds its Node registered already leaves them at 0.
type startupTracker struct {
	clock clock.Clock

	mu                                      sync.Mutex
	boot, start, attempt, registered, ready time.Time

	preKubelet, preRegistration, registration, postRegistration, total prometheus.Gauge
}

// newStartupTracker registers the gauges with reg (nil: not registered).
// start is the kubelet's start; boot the machine's boot (zero: unknown).
func newStartupTracker(reg prometheus.Registerer, clk clock.Clock, boot, start time.Time) (*startupTracker, error) {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: name, Help: "[ALPHA] " + help})
	}
	t := &startupTracker{clock: clk, boot: boot, start: start,
		preKubelet:       g("node_startup_pre_kubelet_duration_seconds", "Duration in seconds of node startup before kubelet starts."),
		preRegistration:  g("node_startup_pre_registration_duration_seconds", "Duration in seconds of node startup before registration."),
		registration:     g("node_startup_registration_duration_seconds", "Duration in seconds of node startup during registration."),
		postRegistration: g("node_startup_post_registration_duration_seconds", "Duration in seconds of node startup after registration."),
		total:            g("node_startup_duration_seconds", "Duration in seconds of node startup in total."),
	}
	if reg == nil {
		return t, nil
	}
	for _, c := range []prometheus.Collector{t.preKubelet, t.preRegistration, t.registration, t.postRegistration, t.total} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("nodestatus: register metrics: %w", err)
		}
	}
	return t, nil
}

// attemptRegister records the first registration attempt.
func (t *startupTracker) attemptRegister() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.attempt.IsZero() {
		t.attempt = t.clock.Now()
	}
}

// registeredNewNode records that this kubelet created its Node.
func (t *startupTracker) registeredNewNode() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.attempt.IsZero() || !t.registered.IsZero() {
		return
	}
	t.registered = t.clock.Now()
	if !t.boot.IsZero() {
		t.preKubelet.Set(t.start.Sub(t.boot).Seconds())
	}
	t.preRegistration.Set(t.attempt.Sub(t.start).Seconds())
	t.registration.Set(t.registered.Sub(t.attempt).Seconds())
}

// nodeReady records the first status patch that reported Ready=True.
func (t *startupTracker) nodeReady() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.registered.IsZero() || !t.ready.IsZero() {
		return
	}
	t.ready = t.clock.Now()
	t.postRegistration.Set(t.ready.Sub(t.registered).Seconds())
	if !t.boot.IsZero() {
		t.total.Set(t.ready.Sub(t.boot).Seconds())
	}
}
