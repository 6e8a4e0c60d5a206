package server

import (
	"context"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Metrics counts and times the CRI calls the shim serves, per operation (the
// RPC's method name) and gRPC code: dockershim_operations_total and
// dockershim_operations_duration_seconds.
type Metrics struct {
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers the shim's operation metrics with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dockershim_operations_total",
			Help: "CRI operations served by the dockershim, by operation and gRPC code.",
		}, []string{"operation", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dockershim_operations_duration_seconds",
			Help:    "Latency of the CRI operations served by the dockershim, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9),
		}, []string{"operation"}),
	}
	for _, c := range []prometheus.Collector{m.total, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(fullMethod string, start time.Time, err error) {
	op := path.Base(fullMethod)
	m.total.WithLabelValues(op, status.Code(err).String()).Inc()
	m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// Unary is the interceptor of unary calls.
func (m *Metrics) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		m.observe(info.FullMethod, start, err)
		return resp, err
	}
}

// Stream is the interceptor of streaming calls (timed until the stream ends).
func (m *Metrics) Stream() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		err := handler(srv, ss)
		m.observe(info.FullMethod, start, err)
		return err
	}
}
