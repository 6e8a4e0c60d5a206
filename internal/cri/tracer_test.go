package cri

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestOperationType(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		method string
		want   string
	}{
		{"/runtime.v1.RuntimeService/Version", "version"},
		{"runtime.v1.RuntimeService/RunPodSandbox", "run_podsandbox"},
		{"runtime.v1.RuntimeService/StopPodSandbox", "stop_podsandbox"},
		{"runtime.v1.RuntimeService/RemovePodSandbox", "remove_podsandbox"},
		{"runtime.v1.RuntimeService/PodSandboxStatus", "podsandbox_status"},
		{"runtime.v1.RuntimeService/ListPodSandbox", "list_podsandbox"},
		{"runtime.v1.RuntimeService/CreateContainer", "create_container"},
		{"runtime.v1.RuntimeService/StartContainer", "start_container"},
		{"runtime.v1.RuntimeService/StopContainer", "stop_container"},
		{"runtime.v1.RuntimeService/RemoveContainer", "remove_container"},
		{"runtime.v1.RuntimeService/ListContainers", "list_containers"},
		{"runtime.v1.RuntimeService/ContainerStatus", "container_status"},
		{"runtime.v1.RuntimeService/UpdateContainerResources", "update_container"},
		{"runtime.v1.RuntimeService/ReopenContainerLog", "reopen_container_log"},
		{"runtime.v1.RuntimeService/ExecSync", "exec_sync"},
		{"runtime.v1.RuntimeService/Exec", "exec"},
		{"runtime.v1.RuntimeService/Attach", "attach"},
		{"runtime.v1.RuntimeService/PortForward", "port_forward"},
		{"runtime.v1.RuntimeService/ContainerStats", "container_stats"},
		{"runtime.v1.RuntimeService/ListContainerStats", "list_container_stats"},
		{"runtime.v1.RuntimeService/PodSandboxStats", "podsandbox_stats"},
		{"runtime.v1.RuntimeService/ListPodSandboxStats", "list_podsandbox_stats"},
		{"runtime.v1.RuntimeService/UpdateRuntimeConfig", "update_runtime_config"},
		{"runtime.v1.RuntimeService/Status", "status"},
		{"runtime.v1.RuntimeService/CheckpointContainer", "checkpoint_container"},
		{"runtime.v1.RuntimeService/GetContainerEvents", "get_container_events"},
		{"runtime.v1.RuntimeService/ListMetricDescriptors", "list_metric_descriptors"},
		{"runtime.v1.RuntimeService/ListPodSandboxMetrics", "list_podsandbox_metrics"},
		{"runtime.v1.RuntimeService/RuntimeConfig", "runtime_config"},
		{"runtime.v1.RuntimeService/UpdatePodSandboxResources", "update_podsandbox_resources"},
		{"runtime.v1.RuntimeService/StreamPodSandboxes", "stream_podsandboxes"},
		{"runtime.v1.ImageService/ListImages", "list_images"},
		{"runtime.v1.ImageService/ImageStatus", "image_status"},
		{"runtime.v1.ImageService/PullImage", "pull_image"},
		{"runtime.v1.ImageService/RemoveImage", "remove_image"},
		{"runtime.v1.ImageService/ImageFsInfo", "image_fs_info"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			if got := operationType(tc.method); got != tc.want {
				t.Errorf("operationType(%q) = %q, want %q", tc.method, got, tc.want)
			}
		})
	}
}

// TestSpanRecordsMetrics drives the spans the way otelgrpc does and checks
// what ends up in the registry.
func TestSpanRecordsMetrics(t *testing.T) {
	t.Parallel()
	const method = "runtime.v1.RuntimeService/StartContainer"
	for _, tc := range []struct {
		desc     string
		attrs    []attribute.KeyValue
		status   otelcodes.Code
		wantCode string // "" = no error recorded
	}{
		{desc: "success, canonical name", attrs: []attribute.KeyValue{responseStatusCodeKey.String("OK")}},
		{desc: "success, no attribute"},
		{desc: "canonical name", attrs: []attribute.KeyValue{responseStatusCodeKey.String("NOT_FOUND")}, status: otelcodes.Error, wantCode: "NotFound"},
		{desc: "numeric code (older otelgrpc)", attrs: []attribute.KeyValue{grpcStatusCodeKey.Int(4)}, status: otelcodes.Error, wantCode: "DeadlineExceeded"},
		{desc: "error status without code", status: otelcodes.Error, wantCode: "Unknown"},
		{desc: "unparsable code", attrs: []attribute.KeyValue{responseStatusCodeKey.String("CODE(99)")}, status: otelcodes.Error, wantCode: "Unknown"},
		{desc: "other attributes ignored", attrs: []attribute.KeyValue{attribute.String("rpc.method", method)}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			tp, err := newMetricsTracerProvider(reg)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now().Add(-time.Second)
			_, span := tp.Tracer("test").Start(context.Background(), method, trace.WithTimestamp(start))
			if !span.IsRecording() {
				t.Fatal("span not recording before End")
			}
			if tc.status != otelcodes.Unset {
				span.SetStatus(tc.status, "boom")
			}
			span.SetAttributes(tc.attrs...)
			span.End()
			span.End() // a second End is ignored
			if span.IsRecording() {
				t.Error("span still recording after End")
			}

			if got := counter(t, reg, operationsTotalName, op("start_container")); got != 1 {
				t.Errorf("operations = %v, want 1", got)
			}
			if n, sum := histogram(t, reg, "start_container"); n != 1 || sum < 1 || sum > 5 {
				t.Errorf("duration count %d sum %v, want 1 and about 1s (start timestamp honoured)", n, sum)
			}
			errs := 0.0
			if tc.wantCode != "" {
				errs = counter(t, reg, operationsErrorsName, op("start_container"))
				if errs != 1 {
					t.Errorf("errors{code=%s} = %v, want 1", tc.wantCode, errs)
				}
			}
			if total := testTotal(t, reg, operationsErrorsName); total != errs {
				t.Errorf("errors recorded in total %v, want %v", total, errs)
			}
		})
	}
}

// testTotal sums every sample of a counter family.
func testTotal(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// TestSpanPassesParentContext checks that a caller's span context stays what
// otelgrpc propagates, and SetName changes the recorded operation.
func TestSpanPassesParentContext(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	tp, err := newMetricsTracerProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled,
	})
	ctx, span := tp.Tracer("test").Start(trace.ContextWithSpanContext(context.Background(), parent), "x/Version")
	if got := trace.SpanContextFromContext(ctx); !got.Equal(parent) {
		t.Errorf("span context in ctx = %v, want the parent's %v", got, parent)
	}
	if span.TracerProvider() != tp {
		t.Error("TracerProvider() is not the provider that made the span")
	}
	span.SetName("x/ListImages")
	span.End()
	if got := counter(t, reg, operationsTotalName, op("list_images")); got != 1 {
		t.Errorf("operations{list_images} = %v, want 1", got)
	}
}

// TestSharedRegisterer checks that two providers on one registry share the
// collectors instead of failing to register.
func TestSharedRegisterer(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	for i := 0; i < 2; i++ {
		tp, err := newMetricsTracerProvider(reg)
		if err != nil {
			t.Fatalf("provider %d: %v", i, err)
		}
		_, span := tp.Tracer("test").Start(context.Background(), "x/Status")
		span.End()
	}
	if got := counter(t, reg, operationsTotalName, op("status")); got != 2 {
		t.Errorf("operations{status} = %v, want 2", got)
	}
	// A different collector under the same name is a real conflict.
	conflict := prometheus.NewRegistry()
	conflict.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: operationsTotalName, Help: "x"}))
	if _, err := newMetricsTracerProvider(conflict); err == nil {
		t.Error("no error for a conflicting collector")
	}
}

// TestTeeSpanExportsAndCounts: with tracing configured, an RPC's span is
// exported (as a child of the caller's span, with what otelgrpc set on it)
// and still counted in the runtime operation metrics.
func TestTeeSpanExportsAndCounts(t *testing.T) {
	t.Parallel()
	reg, rec, export, tee := newTeeEnv(t)

	ctx, parent := export.Tracer("kubelet").Start(context.Background(), "syncPod")
	_, span := tee.Tracer("otelgrpc").Start(ctx, "runtime.v1.RuntimeService/StartContainer", trace.WithSpanKind(trace.SpanKindClient))
	span.SetAttributes(responseStatusCodeKey.String("NOT_FOUND"))
	span.SetStatus(otelcodes.Error, "not found")
	span.End()
	parent.End()

	if got := counter(t, reg, operationsTotalName, op("start_container")); got != 1 {
		t.Errorf("operations counted %v, want 1", got)
	}
	if got := counter(t, reg, operationsErrorsName, op("start_container")); got != 1 {
		t.Errorf("errors counted %v, want 1", got)
	}
	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans exported, want 2", len(ended))
	}
	rpc := ended[0]
	if rpc.Name() != "runtime.v1.RuntimeService/StartContainer" || rpc.Parent().SpanID() != parent.SpanContext().SpanID() ||
		rpc.Status().Code != otelcodes.Error || len(rpc.Attributes()) != 1 {
		t.Errorf("exported span %q parent %v status %v attributes %v", rpc.Name(), rpc.Parent().SpanID(), rpc.Status(), rpc.Attributes())
	}
}

// TestTeeSpanUnsampledStillCounts: an RPC whose exported span is not sampled
// (tracing's default rate is 0) is still counted: the tee span records.
func TestTeeSpanUnsampledStillCounts(t *testing.T) {
	t.Parallel()
	reg, rec, _, tee := newTeeEnv(t, sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	_, span := tee.Tracer("otelgrpc").Start(context.Background(), "runtime.v1.RuntimeService/ListContainers")
	if !span.IsRecording() {
		t.Fatal("an unsampled RPC's span does not record: otelgrpc would never end it")
	}
	span.End()
	if got := counter(t, reg, operationsTotalName, op("list_containers")); got != 1 {
		t.Errorf("operations counted %v, want 1", got)
	}
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d unsampled spans exported", n)
	}
}

// newTeeEnv is a tee provider over a metrics provider on a new registry and
// an SDK provider (opts) exporting to a span recorder.
func newTeeEnv(t *testing.T, opts ...sdktrace.TracerProviderOption) (*prometheus.Registry, *tracetest.SpanRecorder, *sdktrace.TracerProvider, *teeTracerProvider) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := newMetricsTracerProvider(reg)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	export := sdktrace.NewTracerProvider(append(opts, sdktrace.WithSpanProcessor(rec))...)
	return reg, rec, export, &teeTracerProvider{export: export, metrics: m}
}
