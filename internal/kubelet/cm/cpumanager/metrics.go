package cpumanager

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/cpuset"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
)

// metrics are upstream's CPU manager series (pkg/kubelet/metrics), served
// whatever the policy, as upstream registers them; the static policy moves
// them.
type metrics struct {
	requests, errors prometheus.Counter
	sharedPool       prometheus.Gauge // millicores
	exclusive        prometheus.Gauge
	perNUMA          *prometheus.GaugeVec
	alignedOK        *prometheus.CounterVec
	alignedFailed    *prometheus.CounterVec
	// numaShown are the NUMA nodes perNUMA has a series for.
	numaShown map[int]bool
}

// Upstream's label values of the aligned counters.
const (
	alignScopeContainer = "container"
	alignedPhysicalCPU  = "physical_cpu"
	alignedUncoreCache  = "uncore_cache"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "cpu_manager_pinning_requests_total",
			Help: "[ALPHA] The number of cpu core allocations which required pinning."}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Subsystem: "kubelet", Name: "cpu_manager_pinning_errors_total",
			Help: "[ALPHA] The number of cpu core allocations which required pinning failed."}),
		sharedPool: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "cpu_manager_shared_pool_size_millicores",
			Help: "[ALPHA] The size of the shared CPU pool for non-guaranteed QoS pods, in millicores."}),
		exclusive: prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "cpu_manager_exclusive_cpu_allocation_count",
			Help: "[ALPHA] The total number of CPUs exclusively allocated to containers running on this node"}),
		perNUMA: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "kubelet", Name: "cpu_manager_allocation_per_numa",
			Help: "[ALPHA] Number of CPUs allocated per NUMA node"}, []string{"numa_node"}),
		numaShown: map[int]bool{},
	}
	var err error
	if m.alignedOK, m.alignedFailed, err = topologymanager.AlignedCounters(reg); err != nil {
		return nil, err
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.requests, m.errors, m.sharedPool, m.exclusive, m.perNUMA} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("cpumanager: register metrics: %w", err)
		}
	}
	return m, nil
}

// initAligned shows the static policy's aligned counters at 0 (upstream's
// initializeMetrics; the gauges are set from the state with them).
func (m *metrics) initAligned() {
	m.alignedFailed.WithLabelValues(alignedPhysicalCPU, alignScopeContainer).Add(0)
	m.alignedOK.WithLabelValues(alignedPhysicalCPU, alignScopeContainer).Add(0)
	m.alignedOK.WithLabelValues(alignedUncoreCache, alignScopeContainer).Add(0)
}

// setAssigned sets the exclusive count and the per-NUMA counts from every
// CPU held exclusively. A NUMA node whose last CPU was released shows 0
// (upstream leaves its last count).
func (m *metrics) setAssigned(topo *Topology, assigned cpuset.CPUSet) {
	m.exclusive.Set(float64(assigned.Size()))
	count := map[int]int{}
	for _, cpu := range assigned.UnsortedList() {
		count[topo.CPUDetails[cpu].NUMANodeID]++
	}
	for node := range m.numaShown {
		if count[node] == 0 {
			m.perNUMA.WithLabelValues(strconv.Itoa(node)).Set(0)
		}
	}
	for node, n := range count {
		m.perNUMA.WithLabelValues(strconv.Itoa(node)).Set(float64(n))
		m.numaShown[node] = true
	}
}
