package auth

import (
	"fmt"
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/certificate"
)

// servingCertMetrics are upstream's series of the serving certificate
// manager (pkg/kubelet/certificate/kubelet.go), registered with reg (nil:
// not registered). The TTL gauge reads the manager at each scrape.
type servingCertMetrics struct {
	renewErrors prometheus.Counter
	rotation    prometheus.Histogram
}

func newServingCertMetrics(reg prometheus.Registerer) (*servingCertMetrics, error) {
	m := &servingCertMetrics{
		renewErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Subsystem: "kubelet", Name: "server_expiration_renew_errors",
			Help: "[ALPHA] Counter of certificate renewal errors.",
		}),
		rotation: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "kubelet", Subsystem: "certificate_manager", Name: "server_rotation_seconds",
			Help:    "[ALPHA] Histogram of the number of seconds the previous certificate lived before being rotated.",
			Buckets: []float64{60, 3600, 14400, 86400, 604800, 2592000, 7776000, 15552000, 31104000, 124416000},
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.renewErrors, m.rotation} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("serving certificate metrics: %w", err)
		}
	}
	return m, nil
}

// registerTTL registers kubelet_certificate_manager_server_ttl_seconds over m.
func registerServingTTL(reg prometheus.Registerer, m certificate.Manager) error {
	if reg == nil {
		return nil
	}
	g := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "kubelet", Subsystem: "certificate_manager", Name: "server_ttl_seconds",
		Help: "[ALPHA] Gauge of the shortest TTL (time-to-live) of the Kubelet's serving certificate. The value is in seconds " +
			"until certificate expiry (negative if already expired). If serving certificate is invalid or unused, the value will be +INF.",
	}, func() float64 { return certTTL(m) })
	if err := reg.Register(g); err != nil {
		return fmt.Errorf("serving certificate metrics: %w", err)
	}
	return nil
}

// certTTL is the seconds until the manager's certificate expires, +Inf
// without one (upstream's formula).
func certTTL(m certificate.Manager) float64 {
	c := m.Current()
	if c == nil || c.Leaf == nil {
		return math.Inf(1)
	}
	return math.Trunc(time.Until(c.Leaf.NotAfter).Seconds())
}
