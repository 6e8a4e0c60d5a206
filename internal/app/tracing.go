package app

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	"k8s.io/component-base/tracing"
)

// tracingShutdownTimeout bounds the flush of the spans not exported yet at stop.
const tracingShutdownTimeout = 5 * time.Second

// newTracerProvider is upstream's kubelet tracer provider: none without a
// tracing configuration; else spans exported over OTLP/gRPC (insecure) to
// tracing.endpoint (default localhost:4317), sampled at
// samplingRatePerMillion of the traces this kubelet starts (default 0) and
// always under a sampled parent, with service.name "kubelet" and host.name.
// The provider is flushed and shut down when lc stops.
func newTracerProvider(cfg *Config, hostname string, lc *lifecycle, logger *zap.Logger) (trace.TracerProvider, error) {
	tc := cfg.Kubelet.Tracing
	if tc == nil {
		return nil, nil
	}
	tp, err := tracing.NewProvider(context.Background(), tc, nil, []sdkresource.Option{
		sdkresource.WithAttributes(
			attribute.String("service.name", "kubelet"), // semconv's ServiceNameKey, HostNameKey
			attribute.String("host.name", hostname),
		),
	})
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	lc.onStop("tracing", func() {
		ctx, cancel := context.WithTimeout(context.Background(), tracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			logger.Info("Flush the last spans", zap.Error(err))
		}
	})
	return tp, nil
}

// tracer is the tracer of an instrumentation scope; nil without tracing.
func (n *node) tracer(scope string) trace.Tracer {
	if n.tracing == nil {
		return nil
	}
	return n.tracing.Tracer(scope)
}
