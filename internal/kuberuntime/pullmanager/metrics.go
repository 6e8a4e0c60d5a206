package pullmanager

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// The results of MustAttemptImagePull (the checks counter's result label).
const (
	checkPolicyAllowed    = "credentialPolicyAllowed"
	checkRecordFound      = "credentialRecordFound"
	checkMustAuthenticate = "mustAuthenticate"
	checkError            = "error"
)

// Metrics are upstream's kubelet_imagemanager_* series (names, help texts
// and labels as pkg/kubelet/images/pullmanager).
type Metrics struct {
	diskIntents, diskRecords   prometheus.Gauge
	inMemIntents, inMemRecords prometheus.Gauge
	mustPullChecks             *prometheus.CounterVec
}

// NewMetrics registers the series with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: "kubelet", Name: name, Help: "[ALPHA] " + help})
	}
	m := &Metrics{
		diskIntents:  gauge("imagemanager_ondisk_pullintents", "Number of ImagePullIntents stored on disk."),
		diskRecords:  gauge("imagemanager_ondisk_pulledrecords", "Number of ImagePulledRecords stored on disk."),
		inMemIntents: gauge("imagemanager_inmemory_pullintents_usage_percent", "The ImagePullIntents in-memory cache usage in percent."),
		inMemRecords: gauge("imagemanager_inmemory_pulledrecords_usage_percent", "The ImagePulledRecords in-memory cache usage in percent."),
		mustPullChecks: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "kubelet", Name: "imagemanager_image_mustpull_checks_total",
			Help: "[ALPHA] Counter for how many times kubelet checked whether credentials need to be re-verified to access an image"}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.diskIntents, m.diskRecords, m.inMemIntents, m.inMemRecords, m.mustPullChecks} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("pullmanager: register metrics: %w", err)
		}
	}
	return m, nil
}

func (m *Metrics) mustPullCheck(result string) {
	if m != nil {
		m.mustPullChecks.WithLabelValues(result).Inc()
	}
}
