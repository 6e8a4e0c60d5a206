package cri

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/codes"
)

// Span attributes that carry the gRPC status of a finished RPC. otelgrpc
// v0.68 (the version cri-client v0.37 requires) sets the first, as the
// canonical name ("NOT_FOUND"); older releases set the second, as a number.
const (
	responseStatusCodeKey = attribute.Key("rpc.response.status_code")
	grpcStatusCodeKey     = attribute.Key("rpc.grpc.status_code")
)

// metricsTracerProvider is a trace.TracerProvider that exports nothing: its
// spans turn into runtime operation metrics when they end. cri-client passes it
// to otelgrpc, which starts one span per RPC, named "<service>/<method>", and
// ends it with the RPC's status.
type metricsTracerProvider struct {
	embedded.TracerProvider
	metrics *runtimeMetrics
}

func newMetricsTracerProvider(reg prometheus.Registerer) (*metricsTracerProvider, error) {
	m, err := newRuntimeMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &metricsTracerProvider{metrics: m}, nil
}

// Tracer returns a tracer whose spans record metrics.
func (p *metricsTracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer {
	return metricsTracer{provider: p}
}

type metricsTracer struct {
	embedded.Tracer
	provider *metricsTracerProvider
}

// Start begins timing the RPC called name. The span carries the caller's span
// context, so a real trace in ctx still propagates to the runtime.
func (t metricsTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	start := cfg.Timestamp()
	if start.IsZero() {
		start = time.Now()
	}
	s := &metricsSpan{
		provider: t.provider,
		parent:   trace.SpanContextFromContext(ctx),
		name:     name,
		start:    start,
		code:     codes.OK,
	}
	s.setAttributes(cfg.Attributes())
	return trace.ContextWithSpan(ctx, s), s
}

// metricsSpan times one RPC. Methods it does not override are no-ops.
type metricsSpan struct {
	noop.Span
	provider *metricsTracerProvider
	parent   trace.SpanContext

	mu       sync.Mutex
	name     string
	start    time.Time
	code     codes.Code
	codeSeen bool // code came from a status attribute
	failed   bool // SetStatus(Error) was called
	ended    bool
}

// SpanContext returns the caller's span context (invalid when there is none).
func (s *metricsSpan) SpanContext() trace.SpanContext { return s.parent }

// IsRecording is true until End, so otelgrpc reports the status to the span.
func (s *metricsSpan) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended
}

// SetName renames the operation.
func (s *metricsSpan) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.name = name
}

// SetStatus notes an error status; the code itself comes from the attributes.
func (s *metricsSpan) SetStatus(code otelcodes.Code, _ string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == otelcodes.Error {
		s.failed = true
	}
}

// SetAttributes picks up the gRPC status code.
func (s *metricsSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setAttributes(kv)
}

func (s *metricsSpan) setAttributes(kv []attribute.KeyValue) {
	for _, a := range kv {
		if a.Key != responseStatusCodeKey && a.Key != grpcStatusCodeKey {
			continue
		}
		if c, ok := statusCode(a.Value); ok {
			s.code, s.codeSeen = c, true
		}
	}
}

// End records the operation once: its count, its duration and, unless it
// succeeded, an error with its gRPC code.
func (s *metricsSpan) End(opts ...trace.SpanEndOption) {
	cfg := trace.NewSpanEndConfig(opts...)
	end := cfg.Timestamp()
	if end.IsZero() {
		end = time.Now()
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	code := s.code
	if !s.codeSeen && s.failed {
		code = codes.Unknown
	}
	name, elapsed := s.name, end.Sub(s.start)
	s.mu.Unlock()
	s.provider.metrics.observe(name, elapsed, code)
}

// TracerProvider returns the provider that made the span.
func (s *metricsSpan) TracerProvider() trace.TracerProvider { return s.provider }

// statusCode reads a gRPC status code given as a number (7) or as its
// canonical name ("PERMISSION_DENIED").
func statusCode(v attribute.Value) (codes.Code, bool) {
	var c codes.Code
	switch v.Type() {
	case attribute.INT64:
		n := v.AsInt64()
		if n < 0 || n > int64(^uint32(0)) {
			return 0, false
		}
		return codes.Code(n), true
	case attribute.STRING:
		if err := c.UnmarshalJSON([]byte(strconv.Quote(v.AsString()))); err != nil {
			return 0, false
		}
		return c, true
	default:
		return 0, false
	}
}

// teeTracerProvider starts two spans per RPC: one of the exporting provider
// (the kubelet's tracing) and one of the metrics provider.
type teeTracerProvider struct {
	embedded.TracerProvider
	export  trace.TracerProvider
	metrics *metricsTracerProvider
}

// Tracer returns a tracer starting a span of each provider.
func (p *teeTracerProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return teeTracer{export: p.export.Tracer(name, opts...), metrics: p.metrics.Tracer(name, opts...)}
}

type teeTracer struct {
	embedded.Tracer
	export, metrics trace.Tracer
}

// Start starts the exported span, then the metrics span under it; the
// context carries the exported span, whose context reaches the runtime.
func (t teeTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, exported := t.export.Start(ctx, name, opts...)
	_, m := t.metrics.Start(ctx, name, opts...)
	s := &teeSpan{Span: exported, metrics: m}
	return trace.ContextWithSpan(ctx, s), s
}

// teeSpan is the exported span; what otelgrpc records on it reaches the
// metrics span too.
type teeSpan struct {
	trace.Span
	metrics trace.Span
}

// IsRecording is true while either span records: otelgrpc reports an RPC's
// status and ends its span only then, and the metrics span records every RPC
// while the exported one may not be sampled.
func (s *teeSpan) IsRecording() bool { return s.metrics.IsRecording() || s.Span.IsRecording() }

func (s *teeSpan) End(opts ...trace.SpanEndOption) {
	s.metrics.End(opts...)
	s.Span.End(opts...)
}

func (s *teeSpan) SetStatus(code otelcodes.Code, description string) {
	s.metrics.SetStatus(code, description)
	s.Span.SetStatus(code, description)
}

func (s *teeSpan) SetAttributes(kv ...attribute.KeyValue) {
	s.metrics.SetAttributes(kv...)
	s.Span.SetAttributes(kv...)
}

func (s *teeSpan) SetName(name string) {
	s.metrics.SetName(name)
	s.Span.SetName(name)
}
