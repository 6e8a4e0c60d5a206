package promreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestRegister: the first registration wins, an equal collector gets the
// registered one back, a conflicting one is an error.
func TestRegister(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	opts := prometheus.CounterOpts{Name: "x_total", Help: "X."}
	first, err := Register(reg, prometheus.NewCounterVec(opts, []string{"a"}))
	if err != nil {
		t.Fatal(err)
	}
	again, err := Register(reg, prometheus.NewCounterVec(opts, []string{"a"}))
	if err != nil || again != first {
		t.Fatalf("an equal counter: %p, %v; want the registered %p", again, err, first)
	}
	again.WithLabelValues("v").Inc()
	if n, err := reg.Gather(); err != nil || len(n) != 1 || n[0].GetMetric()[0].GetCounter().GetValue() != 1 {
		t.Fatalf("gathered %v, %v; want one series at 1", n, err)
	}
	if _, err := Register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "Other."}, []string{"a"})); err == nil {
		t.Fatal("a counter of the same name with another help was registered")
	}
}
