package cpumanager

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
)

// TestStaticMetrics: upstream's CPU manager series through a registry shared
// with the topology manager, as the kubelet builds them: the pool and the
// exclusive CPUs follow allocations and removals, full-pcpus-only counts
// aligned and refused containers, and the counters of a refusal move.
func TestStaticMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m, err := New(Options{Policy: PolicyStatic, ReservedMilliCPU: 1000, PolicyOptions: map[string]string{"full-pcpus-only": "true"},
		Topology: mustTopology(t, dualSocketSMT), StateDir: t.TempDir(), Registerer: reg, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	// The topology manager registers the aligned counters too: both share them
	// (with its policy none it shows no numa_node series).
	if _, err := topologymanager.New(topologymanager.Options{Policy: "none", Scope: "container", Registerer: reg,
		Logger: zaptest.NewLogger(t)}); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := func(when, want string) {
		t.Helper()
		names := []string{"kubelet_cpu_manager_pinning_requests_total", "kubelet_cpu_manager_pinning_errors_total",
			"kubelet_cpu_manager_shared_pool_size_millicores", "kubelet_cpu_manager_exclusive_cpu_allocation_count",
			"kubelet_cpu_manager_allocation_per_numa", "kubelet_container_aligned_compute_resources_count",
			"kubelet_container_aligned_compute_resources_failure_count"}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
			t.Errorf("%s: %v", when, err)
		}
	}
	const help = `# HELP kubelet_cpu_manager_pinning_requests_total [ALPHA] The number of cpu core allocations which required pinning.
# TYPE kubelet_cpu_manager_pinning_requests_total counter
# HELP kubelet_cpu_manager_pinning_errors_total [ALPHA] The number of cpu core allocations which required pinning failed.
# TYPE kubelet_cpu_manager_pinning_errors_total counter
# HELP kubelet_cpu_manager_shared_pool_size_millicores [ALPHA] The size of the shared CPU pool for non-guaranteed QoS pods, in millicores.
# TYPE kubelet_cpu_manager_shared_pool_size_millicores gauge
# HELP kubelet_cpu_manager_exclusive_cpu_allocation_count [ALPHA] The total number of CPUs exclusively allocated to containers running on this node
# TYPE kubelet_cpu_manager_exclusive_cpu_allocation_count gauge
# HELP kubelet_container_aligned_compute_resources_count [ALPHA] Cumulative number of aligned compute resources allocated to containers by alignment type.
# TYPE kubelet_container_aligned_compute_resources_count counter
# HELP kubelet_container_aligned_compute_resources_failure_count [ALPHA] Cumulative number of failures to allocate aligned compute resources to containers by alignment type.
# TYPE kubelet_container_aligned_compute_resources_failure_count counter
`
	// 12 CPUs, CPU 0 reserved: 11 may be handed out.
	check("at start", help+`kubelet_cpu_manager_pinning_requests_total 0
kubelet_cpu_manager_pinning_errors_total 0
kubelet_cpu_manager_shared_pool_size_millicores 11000
kubelet_cpu_manager_exclusive_cpu_allocation_count 0
kubelet_container_aligned_compute_resources_count{boundary="physical_cpu",scope="container"} 0
kubelet_container_aligned_compute_resources_count{boundary="uncore_cache",scope="container"} 0
kubelet_container_aligned_compute_resources_failure_count{boundary="physical_cpu",scope="container"} 0
`)

	// Two whole cores (NUMA node 0 still has two free, beside the reserved
	// CPU's core: one socket, so one uncore cache), then an odd request
	// refused.
	four := makePod("g4", nil, ctr("app", "4"))
	if err := m.Allocate(four, &four.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	odd := makePod("g3", nil, ctr("app", "3"))
	err = m.Allocate(odd, &odd.Spec.Containers[0])
	if _, ok := err.(SMTAlignmentError); !ok || err.(SMTAlignmentError).Type() != "SMTAlignmentError" {
		t.Fatalf("3 CPUs on SMT 2 with full-pcpus-only: %v, want an SMTAlignmentError", err)
	}
	check("after an allocation and a refusal", help+`# HELP kubelet_cpu_manager_allocation_per_numa [ALPHA] Number of CPUs allocated per NUMA node
# TYPE kubelet_cpu_manager_allocation_per_numa gauge
kubelet_cpu_manager_allocation_per_numa{numa_node="0"} 4
kubelet_cpu_manager_pinning_requests_total 2
kubelet_cpu_manager_pinning_errors_total 1
kubelet_cpu_manager_shared_pool_size_millicores 7000
kubelet_cpu_manager_exclusive_cpu_allocation_count 4
kubelet_container_aligned_compute_resources_count{boundary="physical_cpu",scope="container"} 1
kubelet_container_aligned_compute_resources_count{boundary="uncore_cache",scope="container"} 1
kubelet_container_aligned_compute_resources_failure_count{boundary="physical_cpu",scope="container"} 1
`)

	// The pod goes: its NUMA node shows 0 again.
	if err := m.RemovePod("g4"); err != nil {
		t.Fatal(err)
	}
	check("after the removal", help+`# HELP kubelet_cpu_manager_allocation_per_numa [ALPHA] Number of CPUs allocated per NUMA node
# TYPE kubelet_cpu_manager_allocation_per_numa gauge
kubelet_cpu_manager_allocation_per_numa{numa_node="0"} 0
kubelet_cpu_manager_pinning_requests_total 2
kubelet_cpu_manager_pinning_errors_total 1
kubelet_cpu_manager_shared_pool_size_millicores 11000
kubelet_cpu_manager_exclusive_cpu_allocation_count 0
kubelet_container_aligned_compute_resources_count{boundary="physical_cpu",scope="container"} 1
kubelet_container_aligned_compute_resources_count{boundary="uncore_cache",scope="container"} 1
kubelet_container_aligned_compute_resources_failure_count{boundary="physical_cpu",scope="container"} 1
`)
}

// TestNoneMetrics: with the none policy the series are served at 0, as
// upstream registers them whatever the policy.
func TestNoneMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	if _, err := New(Options{Topology: mustTopology(t, twoCPUs), StateDir: t.TempDir(), Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	n, err := testutil.GatherAndCount(reg, "kubelet_cpu_manager_pinning_requests_total", "kubelet_cpu_manager_pinning_errors_total",
		"kubelet_cpu_manager_shared_pool_size_millicores", "kubelet_cpu_manager_exclusive_cpu_allocation_count")
	if err != nil || n != 4 {
		t.Errorf("none policy: %d series (%v), want 4", n, err)
	}
}
