package cri

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/kubelet-dockershim/kubelet/internal/promreg"
)

// Metric names, as the upstream kubelet exports them.
const (
	operationsTotalName    = "kubelet_runtime_operations_total"
	operationsErrorsName   = "kubelet_runtime_operations_errors_total"
	operationsDurationName = "kubelet_runtime_operations_duration_seconds"
)

// runtimeMetrics are the per-operation collectors of one Registerer.
type runtimeMetrics struct {
	operations *prometheus.CounterVec
	errors     *prometheus.CounterVec
	duration   *prometheus.HistogramVec
}

// newRuntimeMetrics registers the collectors with reg, reusing collectors that
// an earlier client already registered there.
func newRuntimeMetrics(reg prometheus.Registerer) (*runtimeMetrics, error) {
	operations, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: operationsTotalName,
		Help: "[ALPHA] Cumulative number of runtime operations by operation type.",
	}, []string{"operation_type"}))
	if err != nil {
		return nil, err
	}
	errs, err := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: operationsErrorsName,
		Help: "[ALPHA] Cumulative number of runtime operation errors by operation type.",
	}, []string{"operation_type"}))
	if err != nil {
		return nil, err
	}
	duration, err := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    operationsDurationName,
		Help:    "[ALPHA] Duration in seconds of runtime operations. Broken down by operation type.",
		Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
	}, []string{"operation_type"}))
	if err != nil {
		return nil, err
	}
	return &runtimeMetrics{operations: operations, errors: errs, duration: duration}, nil
}

// register registers c with reg, or returns the equal collector registered
// before.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	c, err := promreg.Register(reg, c)
	if err != nil {
		return c, fmt.Errorf("cri: register runtime operation metrics: %w", err)
	}
	return c, nil
}

// observe records one finished RPC.
func (m *runtimeMetrics) observe(method string, elapsed time.Duration, code codes.Code) {
	op := operationType(method)
	m.operations.WithLabelValues(op).Inc()
	m.duration.WithLabelValues(op).Observe(elapsed.Seconds())
	if code != codes.OK {
		m.errors.WithLabelValues(op).Inc()
	}
}

// operationType maps a gRPC method ("/runtime.v1.RuntimeService/RunPodSandbox",
// with or without the leading slash, or just "RunPodSandbox") to the kubelet's
// operation_type label ("run_podsandbox"): snake case, with "PodSandbox" as
// one word; UpdateContainerResources is "update_container" as upstream.
func operationType(method string) string {
	if i := strings.LastIndexByte(method, '/'); i >= 0 {
		method = method[i+1:]
	}
	if method == "UpdateContainerResources" { // the one name the kubelet shortens
		return "update_container"
	}
	method = strings.ReplaceAll(method, "PodSandbox", "Podsandbox")
	var b strings.Builder
	for i, r := range method {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
