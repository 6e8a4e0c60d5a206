package kubeletserver

import (
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The API's requests get upstream's go-restful span names, each a root (a
// caller's traceparent is not followed: upstream's kubelet has no
// propagator); plain handlers (/healthz, /metrics) get none.
func TestRequestSpans(t *testing.T) {
	t.Parallel()
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, readOnly := range []bool{false, true} {
		rec := tracetest.NewSpanRecorder()
		opts := testAPIOptions(&fakeHost{pods: []*v1.Pod{testPod()}})
		opts.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		var h http.Handler
		var err error
		if readOnly {
			h, err = NewReadOnlyHandler(opts)
		} else {
			h, err = NewAPIHandler(opts)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{"/pods", "/healthz", "/containerLogs/ns/web/main"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.Header.Set("traceparent", traceparent)
			h.ServeHTTP(httptest.NewRecorder(), req)
		}
		spans := rec.Ended()
		var names []string
		for _, s := range spans {
			names = append(names, s.Name())
		}
		want := []string{"/pods", "/containerLogs/{podNamespace}/{podID}/{containerName}"}
		if readOnly {
			want = want[:1] // the read-only server has no logs
		}
		if len(names) != len(want) || names[0] != want[0] || (len(want) > 1 && names[1] != want[1]) {
			t.Fatalf("read-only %v: spans %q, want %q", readOnly, names, want)
		}
		s := spans[0]
		if got := s.InstrumentationScope().Name; got != TracerName {
			t.Errorf("scope %q", got)
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes() {
			attrs[a.Key] = a.Value
		}
		if attrs["http.route"].AsString() != "/pods" || attrs["http.request.method"].AsString() != "GET" || attrs["http.response.status_code"].AsInt64() != 200 {
			t.Errorf("attributes %v", s.Attributes())
		}
		if s.Parent().IsValid() || s.SpanContext().TraceID().String() == "4bf92f3577b34da6a3ce929d0e0e4736" || len(s.Links()) != 0 {
			t.Errorf("span %s follows the caller's traceparent (parent %v, links %v)", s.Name(), s.Parent(), s.Links())
		}
	}
}
