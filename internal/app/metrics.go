package app

import (
	"fmt"

	"k8s.io/component-base/metrics"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/metrics/legacyregistry"

	// client-go's metrics (rest_client_*, workqueue_*, ...) into the
	// legacy registry, as upstream's kubelet does with the same import.
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
)

// nodeMetrics is the registry of /metrics: this process's series
// (kubelet_*, the shim's, the CRI client's) and, as upstream, the
// component-base legacy registry, which holds process_*, go_* (every runtime
// metric), rest_client_*, and kubernetes_feature_enabled. The latter are
// process-wide by nature (client-go reports into one global hook).
type nodeMetrics struct {
	reg      *prometheus.Registry
	gatherer prometheus.Gatherer
}

// newNodeMetrics builds the registry with kubernetes_build_info (the
// version this kubelet reports) and records every feature gate's state in
// kubernetes_feature_enabled.
func newNodeMetrics(cfg *Config, fg featuregate.FeatureGate) (*nodeMetrics, error) {
	reg := prometheus.NewRegistry()
	info := versionInfo(cfg.ReportedVersion)
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "kubernetes", Name: "build_info",
		Help: "[BETA] A metric with a constant '1' value labeled by major, minor, git version, git commit, git tree state, " +
			"build date, Go version, and compiler from which Kubernetes was built, and platform on which it is running.",
	}, []string{"major", "minor", "git_version", "git_commit", "git_tree_state", "build_date", "go_version", "compiler", "platform"})
	build.WithLabelValues(info.Major, info.Minor, info.GitVersion, info.GitCommit, info.GitTreeState, info.BuildDate,
		info.GoVersion, info.Compiler, info.Platform).Set(1)
	if err := reg.Register(build); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	if m, ok := fg.(interface{ AddMetrics() }); ok {
		m.AddMetrics()
	}
	if cfg.Kubelet.ShowHiddenMetricsForVersion != "" {
		// The deprecated metrics of the registry's libraries hidden since
		// the previous minor version are served again (upstream's
		// SetShowHidden; this kubelet's own metrics have none).
		metrics.SetShowHidden()
	}
	return &nodeMetrics{reg: reg, gatherer: prometheus.Gatherers{legacyregistry.DefaultGatherer, reg}}, nil
}

// setNodeName registers kubelet_node_name, 1 for the node's name.
func (m *nodeMetrics) setNodeName(nodeName string) error {
	name := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: "kubelet", Name: "node_name", Help: "[ALPHA] The node's name. The count is always 1.",
	}, []string{"node"})
	name.WithLabelValues(nodeName).Set(1)
	if err := m.reg.Register(name); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	return nil
}
