package nodeshutdown

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// storeState replaces the state file atomically (temp file, fsync, rename).
func storeState(path string, st shutdownState) (retErr error) {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer func() {
		if retErr != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
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
