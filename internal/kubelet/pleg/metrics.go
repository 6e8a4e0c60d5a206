package pleg

import (
	"fmt"
	"sync"

	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/prometheus/client_golang/prometheus"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// metrics are upstream's PLEG series (pkg/kubelet/metrics), with its names,
// help texts (served with the "[ALPHA] " stability prefix) and buckets.
type metrics struct {
	relistDuration    prometheus.Histogram
	relistInterval    prometheus.Histogram
	lastSeen          prometheus.Gauge
	runningPods       prometheus.Gauge
	runningContainers *prometheus.GaugeVec
	connErrors        prometheus.Counter
	connSuccess       prometheus.Counter
	connLatency       prometheus.Histogram
	running           runningIndex
}

// newMetrics builds the series and registers them with reg (nil: not
// registered). The evented PLEG's series are registered with the generic
// ones, as upstream does, so they read 0 while the event stream is not used.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		relistDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_duration_seconds",
			Help: "[ALPHA] Duration in seconds for relisting pods in PLEG.", Buckets: prometheus.DefBuckets,
		}),
		relistInterval: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "pleg_relist_interval_seconds",
			Help: "[ALPHA] Interval in seconds between relisting in PLEG.", Buckets: prometheus.DefBuckets,
		}),
		lastSeen: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "pleg_last_seen_seconds",
			Help: "[ALPHA] Timestamp in seconds when PLEG was last seen active.",
		}),
		runningPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "running_pods",
			Help: "[ALPHA] Number of pods that have a running pod sandbox",
		}),
		runningContainers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "running_containers",
			Help: "[ALPHA] Number of containers currently running",
		}, []string{"container_state"}),
		connErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evented_pleg_connection_error_count",
			Help: "[ALPHA] The number of errors encountered during the establishment of streaming connection with the CRI runtime.",
		}),
		connSuccess: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "evented_pleg_connection_success_count",
			Help: "[ALPHA] The number of times a streaming client was obtained to receive CRI Events.",
		}),
		connLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Subsystem: "kubelet", Name: "evented_pleg_connection_latency_seconds",
			Help:    "[ALPHA] The latency of streaming connection with the CRI runtime, measured in seconds.",
			Buckets: prometheus.DefBuckets,
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.relistDuration, m.relistInterval, m.lastSeen, m.runningPods,
		m.runningContainers, m.connErrors, m.connSuccess, m.connLatency} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("pleg: register metrics: %w", err)
		}
	}
	return m, nil
}

// podCounts is what one pod adds to kubelet_running_pods and
// kubelet_running_containers.
type podCounts struct {
	sandboxRunning bool
	states         map[kubecontainer.State]int
}

// runningIndex keeps each pod's counts so that the evented PLEG, which reads
// one pod at a time, keeps the running gauges as current as the relist does.
type runningIndex struct {
	mu   sync.Mutex
	pods map[k8stypes.UID]podCounts
}

// observeRunning sets kubelet_running_pods (pods with a running sandbox) and
// kubelet_running_containers by state from one relist. As upstream, only the
// states present are set: a state that drops to none keeps its last value.
func (m *metrics) observeRunning(pods []*kubecontainer.Pod) {
	idx := make(map[k8stypes.UID]podCounts, len(pods))
	for _, p := range pods {
		c := podCounts{states: map[kubecontainer.State]int{}}
		for _, sb := range p.Sandboxes {
			c.sandboxRunning = c.sandboxRunning || sb.State == kubecontainer.StateRunning
		}
		for _, ctr := range p.Containers {
			c.states[ctr.State]++
		}
		idx[p.ID] = c
	}
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	m.running.pods = idx
	m.setRunningLocked()
}

// observePod updates one pod's counts from its status (the evented PLEG's
// read); nil: the pod is gone.
func (m *metrics) observePod(uid k8stypes.UID, status *kubecontainer.PodStatus) {
	m.running.mu.Lock()
	defer m.running.mu.Unlock()
	if m.running.pods == nil {
		m.running.pods = map[k8stypes.UID]podCounts{}
	}
	if status == nil {
		delete(m.running.pods, uid)
		m.setRunningLocked()
		return
	}
	c := podCounts{states: map[kubecontainer.State]int{}}
	for _, sb := range status.SandboxStatuses {
		c.sandboxRunning = c.sandboxRunning || sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY
	}
	for _, cs := range status.ContainerStatuses {
		c.states[cs.State]++
	}
	m.running.pods[uid] = c
	m.setRunningLocked()
}

func (m *metrics) setRunningLocked() {
	running := 0
	byState := map[kubecontainer.State]int{}
	for _, c := range m.running.pods {
		if c.sandboxRunning {
			running++
		}
		for st, n := range c.states {
			byState[st] += n
		}
	}
	m.runningPods.Set(float64(running))
	for state, n := range byState {
		m.runningContainers.WithLabelValues(string(state)).Set(float64(n))
	}
}
