package nodestatus

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestStartupTracker: the gauges are set from the first attempt, the
// creation of the Node and the first Ready report, once; a kubelet that
// did not create its Node sets none of them (upstream's rule).
func TestStartupTracker(t *testing.T) {
	t.Parallel()
	boot := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := boot.Add(30 * time.Second)
	for _, tc := range []struct {
		desc    string
		created bool
		want    map[string]float64
	}{
		{desc: "new node", created: true, want: map[string]float64{
			"kubelet_node_startup_pre_kubelet_duration_seconds": 30, "kubelet_node_startup_pre_registration_duration_seconds": 2,
			"kubelet_node_startup_registration_duration_seconds": 1, "kubelet_node_startup_post_registration_duration_seconds": 4,
			"kubelet_node_startup_duration_seconds": 37,
		}},
		{desc: "node registered before", want: map[string]float64{}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewPedanticRegistry()
			clk := clocktesting.NewFakeClock(start)
			tr, err := newStartupTracker(reg, clk, boot, start)
			if err != nil {
				t.Fatal(err)
			}
			clk.Step(2 * time.Second)
			tr.attemptRegister()
			clk.Step(time.Second)
			tr.attemptRegister() // a retry changes nothing
			if tc.created {
				tr.registeredNewNode()
			}
			clk.Step(4 * time.Second)
			tr.nodeReady()
			clk.Step(time.Minute)
			tr.nodeReady() // only the first Ready counts
			for _, g := range []prometheus.Gauge{tr.preKubelet, tr.preRegistration, tr.registration, tr.postRegistration, tr.total} {
				name := g.Desc().String()
				got := testutil.ToFloat64(g)
				want := 0.0
				for n, v := range tc.want {
					if containsName(name, n) {
						want = v
					}
				}
				if got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func containsName(desc, name string) bool { return strings.Contains(desc, `fqName: "`+name+`"`) }
