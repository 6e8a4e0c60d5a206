package pleg

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// TestRelistMetrics checks the series a relist and Healthy set, by upstream's
// names: running pods (a running sandbox), containers by state (a state that
// drops to none keeps its last value, as upstream), one relist interval per
// relist after the first, and the last-seen timestamp.
func TestRelistMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	rt := newFakeRuntime()
	clk := clocktesting.NewFakeClock(t0)
	p, err := NewGeneric(Options{Runtime: rt, Clock: clk, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	rt.setPods(
		pod("a", ctrs(ctr("c1", kubecontainer.StateRunning), ctr("c2", kubecontainer.StateExited)), ctr("s1", kubecontainer.StateRunning)),
		pod("b", ctrs(ctr("c3", kubecontainer.StateCreated)), ctr("s2", kubecontainer.StateExited)),
	)
	p.Relist(context.Background())
	clk.Step(2 * time.Second)
	rt.setPods(pod("a", ctrs(ctr("c1", kubecontainer.StateRunning)), ctr("s1", kubecontainer.StateRunning)))
	p.Relist(context.Background())
	if ok, err := p.Healthy(); !ok {
		t.Fatal(err)
	}
	want := `
# HELP kubelet_running_containers [ALPHA] Number of containers currently running
# TYPE kubelet_running_containers gauge
kubelet_running_containers{container_state="created"} 1
kubelet_running_containers{container_state="exited"} 1
kubelet_running_containers{container_state="running"} 1
# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods gauge
kubelet_running_pods 1
# HELP kubelet_pleg_last_seen_seconds [ALPHA] Timestamp in seconds when PLEG was last seen active.
# TYPE kubelet_pleg_last_seen_seconds gauge
kubelet_pleg_last_seen_seconds 1.767323047e+09
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kubelet_running_containers", "kubelet_running_pods", "kubelet_pleg_last_seen_seconds"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "kubelet_evented_pleg_connection_error_count", "kubelet_evented_pleg_connection_success_count"); n != 2 {
		t.Errorf("evented PLEG counters: %d series, want 2 (registered with the generic ones)", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		if h := mf.GetMetric()[0].GetHistogram(); h != nil {
			counts[mf.GetName()] = h.GetSampleCount()
		}
	}
	if counts["kubelet_pleg_relist_duration_seconds"] != 2 || counts["kubelet_pleg_relist_interval_seconds"] != 1 {
		t.Errorf("relist histograms: %v, want 2 durations and 1 interval", counts)
	}
}
