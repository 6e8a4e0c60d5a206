package streaming

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.uber.org/zap"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	cristreaming "k8s.io/cri-streaming/pkg/streaming"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// readHeaderTimeout bounds how long a client may take to send request headers.
const readHeaderTimeout = 30 * time.Second

// Server serves exec, attach and port-forward streams over HTTP and hands out the
// one-time URLs for them.
type Server struct {
	opts   Options
	logger *zap.Logger

	mu       sync.Mutex
	closed   bool
	addr     string
	lib      cristreaming.Server
	http     *http.Server
	cancel   context.CancelFunc // ends the streams' base context
	stopWait func() bool        // stops the ctx watcher
	done     chan struct{}      // closed when Serve returns

	closeOnce sync.Once
	closeErr  error
}

// New validates opts and wires a Server. It does not listen: call Start.
func New(opts Options) (*Server, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Server{opts: opts, logger: opts.Logger.Named("streaming")}, nil
}

// Start listens on Options.Addr now (so Addr and the URLs are known when it returns)
// and serves in a goroutine until ctx is done or Close is called. Streams in
// progress end then too.
func (s *Server) Start(ctx context.Context) (retErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("streaming server: start after close")
	}
	if s.http != nil {
		return errors.New("streaming server: already started")
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("streaming server: listen on %s: %w", s.opts.Addr, err)
	}
	defer func() {
		if retErr != nil {
			ln.Close()
		}
	}()
	addr := ln.Addr().String()
	base, cancel := context.WithCancel(ctx)
	lib, err := cristreaming.NewServer(s.libConfig(addr), &criRuntime{docker: s.opts.Docker, logger: s.logger, base: base})
	if err != nil {
		cancel()
		return fmt.Errorf("streaming server: %w", err)
	}
	s.addr, s.lib, s.cancel, s.done = addr, lib, cancel, make(chan struct{})
	s.http = &http.Server{
		Handler:           lib,
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          zap.NewStdLog(s.logger),
	}
	go func() {
		defer logging.HandleCrash(s.logger, "streaming server")
		s.serve(s.http, ln, s.done)
	}()
	s.stopWait = context.AfterFunc(ctx, func() { _ = s.Close() })
	s.logger.Info("streaming server listening", zap.String("addr", addr))
	return nil
}

// libConfig builds the library configuration for a server listening on addr.
func (s *Server) libConfig(addr string) cristreaming.Config {
	cfg := cristreaming.DefaultConfig
	cfg.Addr = addr
	cfg.BaseURL = &url.URL{Scheme: "http", Host: addr}
	cfg.StreamIdleTimeout = s.opts.StreamIdleTimeout
	return cfg
}

func (s *Server) serve(srv *http.Server, ln net.Listener, done chan<- struct{}) {
	defer close(done)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.logger.Error("streaming server stopped", zap.Error(err))
	}
}

// Addr returns the address the server listens on ("" before Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Close stops the server and ends the streams in progress. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		srv, cancel, stopWait, done := s.http, s.cancel, s.stopWait, s.done
		s.lib = nil
		s.mu.Unlock()
		if srv == nil {
			return
		}
		if stopWait != nil {
			stopWait()
		}
		cancel()
		if err := srv.Close(); err != nil {
			s.closeErr = fmt.Errorf("streaming server: close: %w", err)
		}
		<-done
		s.logger.Info("streaming server stopped")
	})
	return s.closeErr
}

// library returns the running library server, or ErrNotStarted.
func (s *Server) library() (cristreaming.Server, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lib == nil {
		return nil, ErrNotStarted
	}
	return s.lib, nil
}

// GetExec validates req and returns the absolute URL serving it.
func (s *Server) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if err := validateExecRequest(req); err != nil {
		return nil, fmt.Errorf("exec request: %w", err)
	}
	lib, err := s.library()
	if err != nil {
		return nil, fmt.Errorf("exec request: %w", err)
	}
	resp, err := lib.GetExec(req)
	if err != nil {
		return nil, fmt.Errorf("exec request: %w", err)
	}
	return resp, nil
}

// GetAttach validates req and returns the absolute URL serving it.
func (s *Server) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if err := validateAttachRequest(req); err != nil {
		return nil, fmt.Errorf("attach request: %w", err)
	}
	lib, err := s.library()
	if err != nil {
		return nil, fmt.Errorf("attach request: %w", err)
	}
	resp, err := lib.GetAttach(req)
	if err != nil {
		return nil, fmt.Errorf("attach request: %w", err)
	}
	return resp, nil
}

// GetPortForward validates req and returns the absolute URL serving it.
func (s *Server) GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if err := validatePortForwardRequest(req); err != nil {
		return nil, fmt.Errorf("port-forward request: %w", err)
	}
	lib, err := s.library()
	if err != nil {
		return nil, fmt.Errorf("port-forward request: %w", err)
	}
	resp, err := lib.GetPortForward(req)
	if err != nil {
		return nil, fmt.Errorf("port-forward request: %w", err)
	}
	return resp, nil
}
