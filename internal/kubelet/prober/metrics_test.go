package prober

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestProbeMetrics(t *testing.T) {
	m := newProbeMetrics()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"}}
	m.observe(Readiness, pod, "c", Success, nil, time.Millisecond)
	m.observe(Readiness, pod, "c", Success, nil, time.Millisecond)
	m.observe(Readiness, pod, "c", Failure, nil, time.Millisecond)
	m.observe(Liveness, pod, "c", Failure, errors.New("cannot run"), 0)
	want := `
# HELP prober_probe_total Cumulative number of a liveness, readiness or startup probe for a container by result.
# TYPE prober_probe_total counter
prober_probe_total{container="c",namespace="ns",pod="p",pod_uid="u1",probe_type="Liveness",result="unknown"} 1
prober_probe_total{container="c",namespace="ns",pod="p",pod_uid="u1",probe_type="Readiness",result="failed"} 1
prober_probe_total{container="c",namespace="ns",pod="p",pod_uid="u1",probe_type="Readiness",result="successful"} 2
`
	if err := testutil.GatherAndCompare(m.registry, strings.NewReader(want), "prober_probe_total"); err != nil {
		t.Fatal(err)
	}
	m.forget(Readiness, pod, "c")
	m.forget(Liveness, pod, "c")
	if n, err := testutil.GatherAndCount(m.registry); err != nil || n != 0 {
		t.Fatalf("series left after forget: %d %v", n, err)
	}
}
