package kubeletserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// HostInterface is what the kubelet API needs from the kubelet
// (*kubelet.Kubelet implements it). Errors a client caused carry an API status
// (k8s.io/apimachinery/pkg/api/errors NotFound or BadRequest); runtime errors
// keep their gRPC code (NotFound, Unimplemented, ...). The server maps both to
// HTTP statuses.
type HostInterface interface {
	// PodLister gives the desired pods with their status (/pods).
	PodLister
	// GetPodByName returns the desired pod namespace/name.
	GetPodByName(namespace, name string) (*v1.Pod, bool)
	// GetRunningPods returns the pods the runtime runs (/runningpods/).
	GetRunningPods(ctx context.Context) ([]*v1.Pod, error)
	// GetContainerLogs writes a container's log; a nil writer drops that stream.
	GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts *v1.PodLogOptions, stdout, stderr io.Writer) error
	// GetExec, GetAttach and GetPortForward return the runtime's streaming URL.
	// podUID may be empty (any pod of that name).
	GetExec(ctx context.Context, namespace, podName string, podUID k8stypes.UID, containerName string, cmd []string, opts remotecommand.Options) (*url.URL, error)
	GetAttach(ctx context.Context, namespace, podName string, podUID k8stypes.UID, containerName string, opts remotecommand.Options) (*url.URL, error)
	GetPortForward(ctx context.Context, namespace, podName string, podUID k8stypes.UID, opts portforward.V4Options) (*url.URL, error)
	// RunInContainer runs cmd and returns its stdout followed by its stderr (/run).
	RunInContainer(ctx context.Context, namespace, podName string, podUID k8stypes.UID, containerName string, cmd []string) ([]byte, error)
	// CheckpointContainer checkpoints a container and sets opts.Location to the archive.
	CheckpointContainer(ctx context.Context, namespace, podName string, podUID k8stypes.UID, containerName string, opts *runtimeapi.CheckpointContainerRequest) error
}

// APIOptions configures the kubelet API server (StartAPI) and the read-only one
// (StartReadOnly). Addr, Host and Health are required; StartAPI also needs
// TLSConfig and Filter. A nil optional handler or gatherer leaves its path
// unserved (404).
type APIOptions struct {
	Addr string // host:port, e.g. 0.0.0.0:10250
	// TracerProvider makes a span of each request of a route upstream serves
	// through go-restful (the kubelet's tracing); nil: none.
	TracerProvider trace.TracerProvider
	// TLSConfig serves HTTPS (StartAPI); it must carry a certificate
	// (Certificates, GetCertificate or GetConfigForClient).
	TLSConfig *tls.Config
	// Filter wraps every path of the API server: authentication and
	// authorization (auth.Auth.Filter). The read-only server has none.
	Filter func(http.Handler) http.Handler
	Host   HostInterface
	// Stats serves /stats/ (it sees the full path, e.g. /stats/summary).
	Stats http.Handler
	// CadvisorMetrics serves /metrics/cadvisor (it writes its own exposition).
	CadvisorMetrics http.Handler
	// ResourceMetrics serves /metrics/resource, Gatherer /metrics and
	// ProbeMetrics /metrics/probes.
	ResourceMetrics prometheus.Gatherer
	Gatherer        prometheus.Gatherer
	ProbeMetrics    prometheus.Gatherer
	// Configz returns the document /configz serves ({"kubeletconfig": ...}).
	Configz func() any
	// DisableDebugging (enableDebuggingHandlers false) answers 405 on the
	// debugging paths (run, exec, attach, portForward, containerLogs,
	// runningpods, checkpoint, pprof, logs), as upstream; DisableSystemLogs
	// (enableSystemLogHandler false) and DisableProfiling
	// (enableProfilingHandler false) do so for /logs/ and /debug/pprof/.
	DisableDebugging  bool
	DisableSystemLogs bool
	DisableProfiling  bool
	// SetVerbosity serves PUT /debug/flags/v (the body is the new -v);
	// nil, or DisableDebugFlags (enableDebugFlagsHandler false), answers 405.
	SetVerbosity      func(val string) (string, error)
	DisableDebugFlags bool
	Health            HealthChecker
	// LogDir, when set, is served read-only under /logs/ (upstream: /var/log/).
	// Paths with ".." are refused, and symlinks cannot leave the directory.
	LogDir string
	// SystemLogQuery (enableSystemLogQuery) answers /logs/?query=... with
	// the services' journal or log files (see logquery.go).
	SystemLogQuery bool
	// journal is the node log query's journal; nil: journalctl (tests set it).
	journal journal
	Logger  *zap.Logger
}

// Timeouts of the API servers (upstream values: streams and log follows are long).
const (
	apiIdleTimeout       = 90 * time.Second
	apiReadWriteTimeout  = 4 * time.Hour
	apiReadHeaderTimeout = 30 * time.Second
	apiMaxHeaderBytes    = 1 << 20
)

// StartAPI listens on opts.Addr and serves the kubelet API over HTTPS, every
// path behind opts.Filter, until Close or ctx ends.
func StartAPI(ctx context.Context, opts APIOptions) (*Server, error) {
	if opts.TLSConfig == nil || opts.Filter == nil {
		return nil, errors.New("kubeletserver: StartAPI needs TLSConfig and Filter")
	}
	h, err := NewAPIHandler(opts)
	if err != nil {
		return nil, err
	}
	return listenAndServe(ctx, opts, h, opts.TLSConfig.Clone(), "api")
}

// StartReadOnly listens on opts.Addr and serves the read-only subset (/healthz,
// /pods, /stats/, /metrics, /metrics/cadvisor, /metrics/resource, /metrics/probes) over plain
// HTTP without authentication, as upstream's --read-only-port does.
func StartReadOnly(ctx context.Context, opts APIOptions) (*Server, error) {
	h, err := NewReadOnlyHandler(opts)
	if err != nil {
		return nil, err
	}
	return listenAndServe(ctx, opts, h, nil, "readonly")
}

func listenAndServe(ctx context.Context, opts APIOptions, h http.Handler, tlsConfig *tls.Config, name string) (*Server, error) {
	if opts.Addr == "" {
		return nil, errors.New("kubeletserver: Addr is required")
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on kubelet %s address %s: %w", name, opts.Addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tlsConfig,
		IdleTimeout:       apiIdleTimeout,
		ReadTimeout:       apiReadWriteTimeout,
		WriteTimeout:      apiReadWriteTimeout,
		ReadHeaderTimeout: apiReadHeaderTimeout,
		MaxHeaderBytes:    apiMaxHeaderBytes,
	}
	logger := loggerOf(opts).Named(name)
	srv.ErrorLog = zap.NewStdLog(logger)
	logger.Info("Starting to listen", zap.String("address", ln.Addr().String()), zap.Bool("tls", tlsConfig != nil))
	return serve(ctx, srv, ln, tlsConfig != nil, logger), nil
}

func loggerOf(opts APIOptions) *zap.Logger {
	if opts.Logger == nil {
		return zap.NewNop()
	}
	return opts.Logger
}

// NewAPIHandler builds the kubelet API: every endpoint, behind opts.Filter
// (which may be nil only in tests of the handlers themselves); paths with "."
// or ".." segments are refused with 400 before anything else.
func NewAPIHandler(opts APIOptions) (http.Handler, error) {
	if opts.Host == nil || opts.Health == nil {
		return nil, errors.New("kubeletserver: Host and Health are required")
	}
	a := &api{opts: opts, host: opts.Host, logger: loggerOf(opts), journal: opts.journal}
	if a.journal == nil {
		a.journal = journalctl{}
	}
	mux := http.NewServeMux()
	a.installReadOnly(mux)
	a.installAuthRequired(mux)
	// Dot segments are refused before the filter: it authorizes (and serves)
	// the cleaned path, so behind it they would go unseen.
	h := traceRequests(opts.TracerProvider, mux, mux)
	if opts.Filter != nil {
		h = opts.Filter(h)
	}
	return refuseDotSegments(h), nil
}

// NewReadOnlyHandler builds the read-only subset of the API (no filter).
func NewReadOnlyHandler(opts APIOptions) (http.Handler, error) {
	if opts.Host == nil || opts.Health == nil {
		return nil, errors.New("kubeletserver: Host and Health are required")
	}
	a := &api{opts: opts, host: opts.Host, logger: loggerOf(opts)}
	mux := http.NewServeMux()
	a.installReadOnly(mux)
	return refuseDotSegments(traceRequests(opts.TracerProvider, mux, mux)), nil
}

// api holds the handlers.
type api struct {
	opts    APIOptions
	host    HostInterface
	logger  *zap.Logger
	journal journal // the node log query's
}

// installReadOnly registers what both servers serve (upstream
// InstallAuthNotRequiredHandlers).
func (a *api) installReadOnly(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", healthzHandler(a.opts.Health))
	mux.HandleFunc("GET /pods", podsHandler(a.host))
	if a.opts.Stats != nil {
		mux.Handle("/stats/", a.opts.Stats)
	}
	if a.opts.CadvisorMetrics != nil {
		mux.Handle("GET /metrics/cadvisor", a.opts.CadvisorMetrics)
	}
	for path, g := range map[string]prometheus.Gatherer{
		"/metrics": a.opts.Gatherer, "/metrics/resource": a.opts.ResourceMetrics, "/metrics/probes": a.opts.ProbeMetrics,
	} {
		if g != nil {
			mux.Handle("GET "+path, promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
		}
	}
}

// installAuthRequired registers what only the authenticated server serves
// (upstream InstallAuthRequiredHandlers plus the debugging handlers).
func (a *api) installAuthRequired(mux *http.ServeMux) {
	if a.opts.Configz != nil {
		mux.HandleFunc("GET /configz", a.configz)
	}
	if a.opts.DisableDebugging {
		for _, p := range []string{"/run/", "/exec/", "/attach/", "/portForward/", "/containerLogs/", "/runningpods/", "/debug/pprof/", "/logs/"} {
			mux.Handle(p, disabledEndpoint("Debug endpoints are disabled."))
		}
		return
	}
	mux.HandleFunc("GET /runningpods", a.runningPods)
	mux.HandleFunc("GET /runningpods/{$}", a.runningPods)
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", a.containerLogs)
	for _, m := range []string{"GET ", "POST "} {
		mux.HandleFunc(m+"/exec/{namespace}/{pod}/{container}", a.exec)
		mux.HandleFunc(m+"/exec/{namespace}/{pod}/{uid}/{container}", a.exec)
		mux.HandleFunc(m+"/attach/{namespace}/{pod}/{container}", a.attach)
		mux.HandleFunc(m+"/attach/{namespace}/{pod}/{uid}/{container}", a.attach)
		mux.HandleFunc(m+"/portForward/{namespace}/{pod}", a.portForward)
		mux.HandleFunc(m+"/portForward/{namespace}/{pod}/{uid}", a.portForward)
	}
	mux.HandleFunc("POST /run/{namespace}/{pod}/{container}", a.run)
	mux.HandleFunc("POST /run/{namespace}/{pod}/{uid}/{container}", a.run)
	mux.HandleFunc("POST /checkpoint/{namespace}/{pod}/{container}", a.checkpoint)
	switch {
	case a.opts.DisableSystemLogs:
		mux.Handle("/logs/", disabledEndpoint("logs endpoint is disabled."))
	case a.opts.LogDir != "":
		mux.HandleFunc("GET /logs/", a.nodeLogs)
	}
	if a.opts.DisableDebugFlags || a.opts.SetVerbosity == nil {
		mux.Handle("/debug/flags/v", disabledEndpoint("flags endpoint is disabled."))
	} else {
		mux.Handle("/debug/flags/v", stringFlagPut(a.opts.SetVerbosity))
	}
	if a.opts.DisableProfiling {
		mux.Handle("/debug/pprof/", disabledEndpoint("profiling endpoint is disabled."))
		return
	}
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
}

// stringFlagPut serves a flag set by PUT as upstream's
// StringFlagPutHandler: the body goes to set, its answer or error comes back
// as plain text (200 or 400); other methods get 406.
func stringFlagPut(set func(string) (string, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, text := http.StatusNotAcceptable, "unsupported http method"
		if r.Method == http.MethodPut {
			body, err := io.ReadAll(io.LimitReader(r.Body, 64))
			switch {
			case err != nil:
				status, text = http.StatusBadRequest, "error reading request body: "+err.Error()
			default:
				if text, err = set(string(body)); err != nil {
					status, text = http.StatusBadRequest, err.Error()
				} else {
					status = http.StatusOK
				}
			}
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(status)
		_, _ = fmt.Fprintln(w, text)
	})
}

// disabledEndpoint answers 405 with msg, upstream's answer on a disabled
// endpoint.
func disabledEndpoint(msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, msg, http.StatusMethodNotAllowed)
	})
}

func (a *api) runningPods(w http.ResponseWriter, r *http.Request) {
	pods, err := a.host.GetRunningPods(r.Context())
	if err != nil {
		a.writeError(w, r, err, http.StatusInternalServerError)
		return
	}
	list := &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: make([]v1.Pod, 0, len(pods))}
	for _, p := range pods {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

func (a *api) configz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, a.opts.Configz())
}
