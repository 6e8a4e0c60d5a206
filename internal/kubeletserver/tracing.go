package kubeletserver

import (
	"bufio"
	"errors"
	"net"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the API's request spans:
// upstream's kubelet makes them with go-restful's OpenTelemetry filter.
const TracerName = "go.opentelemetry.io/contrib/instrumentation/github.com/emicklei/go-restful/otelrestful"

// restfulRoutes maps this server's route patterns to upstream's go-restful
// route paths (the span names): only the paths upstream serves through
// go-restful routes get a span (/healthz, /metrics*, /configz and
// /debug/flags/v are plain handlers there, untraced).
var restfulRoutes = map[string]string{
	"GET /pods":            "/pods",
	"GET /runningpods":     "/runningpods/",
	"GET /runningpods/{$}": "/runningpods/",
	"GET /containerLogs/{namespace}/{pod}/{container}": "/containerLogs/{podNamespace}/{podID}/{containerName}",
	"POST /run/{namespace}/{pod}/{container}":          "/run/{podNamespace}/{podID}/{containerName}",
	"POST /run/{namespace}/{pod}/{uid}/{container}":    "/run/{podNamespace}/{podID}/{uid}/{containerName}",
	"POST /checkpoint/{namespace}/{pod}/{container}":   "/checkpoint/{podNamespace}/{podID}/{containerName}",
	"GET /logs/":                                       "/logs/{logpath:*}",
	"GET /debug/pprof/":                                "/debug/pprof/{subpath:*}",
	"GET /debug/pprof/cmdline":                         "/debug/pprof/{subpath:*}",
	"GET /debug/pprof/profile":                         "/debug/pprof/{subpath:*}",
	"GET /debug/pprof/symbol":                          "/debug/pprof/{subpath:*}",
	"POST /debug/pprof/symbol":                         "/debug/pprof/{subpath:*}",
	"GET /debug/pprof/trace":                           "/debug/pprof/{subpath:*}",
	"/stats/":                                          "/stats/summary",
	"GET /stats/summary":                               "/stats/summary",
	"POST /exec/{namespace}/{pod}/{container}":         "/exec/{podNamespace}/{podID}/{containerName}",
	"GET /exec/{namespace}/{pod}/{container}":          "/exec/{podNamespace}/{podID}/{containerName}",
	"POST /exec/{namespace}/{pod}/{uid}/{container}":   "/exec/{podNamespace}/{podID}/{uid}/{containerName}",
	"GET /exec/{namespace}/{pod}/{uid}/{container}":    "/exec/{podNamespace}/{podID}/{uid}/{containerName}",
	"POST /attach/{namespace}/{pod}/{container}":       "/attach/{podNamespace}/{podID}/{containerName}",
	"GET /attach/{namespace}/{pod}/{container}":        "/attach/{podNamespace}/{podID}/{containerName}",
	"POST /attach/{namespace}/{pod}/{uid}/{container}": "/attach/{podNamespace}/{podID}/{uid}/{containerName}",
	"GET /attach/{namespace}/{pod}/{uid}/{container}":  "/attach/{podNamespace}/{podID}/{uid}/{containerName}",
	"POST /portForward/{namespace}/{pod}":              "/portForward/{podNamespace}/{podID}",
	"GET /portForward/{namespace}/{pod}":               "/portForward/{podNamespace}/{podID}",
	"POST /portForward/{namespace}/{pod}/{uid}":        "/portForward/{podNamespace}/{podID}/{uid}",
	"GET /portForward/{namespace}/{pod}/{uid}":         "/portForward/{podNamespace}/{podID}/{uid}",
}

// traceRequests gives each request of a go-restful route of upstream a
// server span named by that route, as upstream's OTel filter does: a root
// span (upstream's kubelet sets no text map propagator, so a caller's
// traceparent is not followed), with the request's method, route, path,
// scheme, server and user agent, and the response status (5xx: an error).
// mux finds the route without serving.
func traceRequests(tp trace.TracerProvider, mux *http.ServeMux, next http.Handler) http.Handler {
	if tp == nil {
		return next
	}
	tracer := tp.Tracer(TracerName)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pattern := mux.Handler(r)
		route, ok := restfulRoutes[pattern]
		if pattern == "/stats/" && r.URL.Path != "/stats/summary" {
			ok = false // upstream's stats service serves only /stats/summary
		}
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		ctx, span := tracer.Start(r.Context(), route, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method), attribute.String("http.route", route),
			attribute.String("url.path", r.URL.Path), attribute.String("url.scheme", scheme(r)),
			attribute.String("server.address", "kubelet"), attribute.String("user_agent.original", r.UserAgent())))
		defer span.End()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, "")
		}
	})
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// statusWriter records the status written; it passes Flush and Hijack on
// (logs follow, streaming upgrades).
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (s *statusWriter) WriteHeader(code int) {
	if !s.wrote {
		s.status, s.wrote = code, true
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	s.wrote = true
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := s.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("kubeletserver: the response writer cannot be hijacked")
	}
	s.wrote = true
	if s.status == http.StatusOK {
		s.status = http.StatusSwitchingProtocols
	}
	return h.Hijack()
}
