package nodeshutdown

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubelet-dockershim/kubelet/internal/atomicfile"
)

// stateFileName is the file under the kubelet root dir that records the
// last graceful shutdown (upstream's name and JSON format).
const stateFileName = "graceful_node_shutdown_state"

// shutdownState is the content of the state file.
type shutdownState struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
}

// loadState reads the state file; a missing file is an empty state.
func loadState(path string) (shutdownState, error) {
	var st shutdownState
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return st, fmt.Errorf("decode %s: %w", path, err)
	}
	return st, nil
}

// storeState replaces the state file atomically.
func storeState(path string, st shutdownState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, b, 0o644)
}

// unixSeconds is t in whole seconds since the epoch, 0 for the zero time.
func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.Unix())
}

// metrics are upstream's graceful shutdown gauges.
type metrics struct {
	start prometheus.Gauge
	end   prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		start: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "graceful_shutdown_start_time_seconds",
			Help: "[ALPHA] Last graceful shutdown start time since unix epoch in seconds",
		}),
		end: prometheus.NewGauge(prometheus.GaugeOpts{
			Subsystem: "kubelet", Name: "graceful_shutdown_end_time_seconds",
			Help: "[ALPHA] Last graceful shutdown end time since unix epoch in seconds",
		}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.start, m.end} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("nodeshutdown: register metrics: %w", err)
		}
	}
	return m, nil
}
