package kubeletserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
	"github.com/kubelet-dockershim/kubelet/internal/unixsock"
)

// HealthChecker says whether the kubelet is healthy (runtime answers, PLEG fresh).
type HealthChecker interface {
	Healthz() error
}

// PodLister lists the pods the node runs, with their current status.
type PodLister interface {
	Pods() []v1.Pod
}

// Options configures the healthz endpoint (Start). Addr and Health are
// required.
type Options struct {
	Addr   string // host:port, e.g. 127.0.0.1:10248
	Health HealthChecker
	Logger *zap.Logger
}

// LocalOptions configures the root-only local socket (StartLocal). Path and
// Health are required.
type LocalOptions struct {
	Path     string // the unix socket, e.g. /var/lib/kubelet/kubelet-local.sock
	Health   HealthChecker
	Pods     PodLister           // nil: /pods answers 404
	Gatherer prometheus.Gatherer // nil: /metrics answers 404
	Logger   *zap.Logger
}

// Server is a running server: the healthz endpoint (Start), the local socket
// (StartLocal), the kubelet API (StartAPI) or the read-only one
// (StartReadOnly).
type Server struct {
	srv       *http.Server
	ln        net.Listener
	done      chan struct{}
	err       error
	closeOnce sync.Once
	logger    *zap.Logger
	// cancel ends the requests' base context (long log follows) on Close.
	cancel context.CancelFunc
}

// localIdleTimeout closes the idle keep-alive connections of the healthz
// endpoint and the local socket (a client that keeps them open would
// otherwise hold a goroutine and an fd of the kubelet each).
const localIdleTimeout = 90 * time.Second

// Start listens on opts.Addr and serves /healthz only, as upstream's healthz
// port does, until Close or ctx ends.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Addr == "" || opts.Health == nil {
		return nil, errors.New("kubeletserver: Addr and Health are required")
	}
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen on healthz address %s: %w", opts.Addr, err)
	}
	srv := &http.Server{Handler: NewHealthzHandler(opts.Health), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: localIdleTimeout}
	return serve(ctx, srv, ln, false, nopIfNil(opts.Logger).Named("healthz")), nil
}

// NewHealthzHandler is the mux of the healthz endpoint: /healthz and nothing
// else.
func NewHealthzHandler(h HealthChecker) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", healthzHandler(h))
	return mux
}

// StartLocal listens on the unix socket opts.Path, mode 0600 (its directory
// 0700 when created), so that only root connects, and serves /healthz, /pods
// and /metrics until Close or ctx ends. A stale socket file (nobody answers)
// is replaced; a live one is an error.
func StartLocal(ctx context.Context, opts LocalOptions) (*Server, error) {
	if opts.Path == "" || opts.Health == nil {
		return nil, errors.New("kubeletserver: Path and Health are required")
	}
	ln, err := unixsock.Listen(ctx, opts.Path, 0o600, 0o700)
	if err != nil {
		return nil, fmt.Errorf("local socket: %w", err)
	}
	srv := &http.Server{Handler: NewLocalHandler(opts), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: localIdleTimeout}
	return serve(ctx, srv, ln, false, nopIfNil(opts.Logger).Named("local")), nil
}

// NewLocalHandler is the mux of the local socket.
func NewLocalHandler(opts LocalOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", healthzHandler(opts.Health))
	if opts.Pods != nil {
		mux.HandleFunc("/pods", podsHandler(opts.Pods))
	}
	if opts.Gatherer != nil {
		mux.Handle("/metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}

func nopIfNil(l *zap.Logger) *zap.Logger {
	if l == nil {
		return zap.NewNop()
	}
	return l
}

// serve runs srv on ln (with srv.TLSConfig when useTLS) until Close or ctx
// ends.
func serve(ctx context.Context, srv *http.Server, ln net.Listener, useTLS bool, logger *zap.Logger) *Server {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	srv.BaseContext = func(net.Listener) context.Context { return base }
	s := &Server{ln: ln, done: make(chan struct{}), logger: logger, srv: srv, cancel: cancel}
	go func() {
		defer close(s.done)
		defer logging.HandleCrash(logger, "kubelet server")
		var err error
		if useTLS {
			err = srv.ServeTLS(ln, "", "")
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.err = err
			logger.Error("server stopped", zap.Error(err))
		}
	}()
	go func() {
		defer logging.HandleCrash(logger, "kubelet server")
		select {
		case <-ctx.Done():
			_ = s.Close()
		case <-s.done:
		}
	}()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server (idempotent). Hijacked connections (exec, attach,
// port-forward streams) are not waited for.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.cancel() // ends requests that run until their context ends (log follows)
		if err := s.srv.Shutdown(ctx); err != nil {
			_ = s.srv.Close()
		}
		<-s.done
	})
	return s.err
}

// healthzHandler answers "ok" while h is healthy, 500 with the reason else
// (/healthz of the local endpoint and of the kubelet API).
func healthzHandler(h HealthChecker) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if err := h.Healthz(); err != nil {
			http.Error(w, "unhealthy: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	}
}

// podsHandler answers the node's pods as a v1 PodList (/pods).
func podsHandler(l PodLister) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: l.Pods()})
	}
}

// writeJSON writes v as a JSON response.
func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(data)
}
