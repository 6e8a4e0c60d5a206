package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
	"github.com/kubelet-dockershim/kubelet/internal/unixsock"
)

const (
	// MaxMessageSize bounds gRPC messages in both directions (the kubelet's
	// CRI client uses the same 16 MiB).
	MaxMessageSize = 16 << 20
	// DefaultShutdownTimeout bounds the graceful part of Close.
	DefaultShutdownTimeout = 10 * time.Second
	// socketMode lets root and the socket's group use the CRI.
	socketMode fs.FileMode = 0o660
	// socketDirMode is used when the socket's directory does not exist.
	socketDirMode fs.FileMode = 0o755
)

// ErrInvalidOptions is wrapped by Start when Options are incomplete.
var ErrInvalidOptions = errors.New("invalid CRI server options")

// Options configures Start.
type Options struct {
	// Endpoint is "unix:///var/run/dockershim.sock" or a plain absolute path.
	Endpoint string
	// Runtime and Image serve the CRI RuntimeService and ImageService.
	Runtime runtimeapi.RuntimeServiceServer
	Image   runtimeapi.ImageServiceServer
	// Logger defaults to zap.NewNop().
	Logger *zap.Logger
	// UnaryInterceptors and StreamInterceptors run after the logging ones,
	// so they see the request in their context.
	UnaryInterceptors  []grpc.UnaryServerInterceptor
	StreamInterceptors []grpc.StreamServerInterceptor
	// ShutdownTimeout bounds GracefulStop in Close before in-flight calls
	// are cut off. Zero means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

// validate checks opts and returns the socket path.
func (o Options) validate() (string, error) {
	if o.Runtime == nil {
		return "", fmt.Errorf("%w: Runtime service is nil", ErrInvalidOptions)
	}
	if o.Image == nil {
		return "", fmt.Errorf("%w: Image service is nil", ErrInvalidOptions)
	}
	if o.ShutdownTimeout < 0 {
		return "", fmt.Errorf("%w: negative ShutdownTimeout %v", ErrInvalidOptions, o.ShutdownTimeout)
	}
	return ParseEndpoint(o.Endpoint)
}

// Server is a running CRI gRPC server. Create it with Start.
type Server struct {
	path            string
	logger          *zap.Logger
	lis             net.Listener
	grpc            *grpc.Server
	shutdownTimeout time.Duration

	ready   chan struct{} // closed once Serve is about to run
	errc    chan error    // buffered; receives an unexpected Serve error
	closing chan struct{} // closed when Close begins
	served  chan struct{} // closed when the serve goroutine returns

	closeOnce sync.Once
	closeErr  error
}

// Start validates opts, prepares the socket (see package doc) and serves in
// a goroutine. The server stops on Close or when ctx is cancelled; pass a
// ctx that outlives the server's clients and call Close for an ordered
// shutdown. On error nothing is left listening.
func Start(ctx context.Context, opts Options) (*Server, error) {
	path, err := opts.validate()
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	logger = logger.Named("cri-server").With(zap.String("socket", path))
	timeout := opts.ShutdownTimeout
	if timeout == 0 {
		timeout = DefaultShutdownTimeout
	}

	lis, err := unixsock.Listen(ctx, path, socketMode, socketDirMode)
	if err != nil {
		return nil, err
	}
	s := &Server{
		path:            path,
		logger:          logger,
		lis:             lis,
		grpc:            newGRPCServer(logger, opts),
		shutdownTimeout: timeout,
		ready:           make(chan struct{}),
		errc:            make(chan error, 1),
		closing:         make(chan struct{}),
		served:          make(chan struct{}),
	}
	go func() {
		defer logging.HandleCrash(logger, "CRI server")
		s.serve()
	}()
	go func() {
		defer logging.HandleCrash(logger, "CRI server close")
		s.closeOnDone(ctx)
	}()
	logger.Info("CRI server listening")
	return s, nil
}

// newGRPCServer builds the gRPC server with the logging interceptors first,
// then Options', then the panic recovery (recover.go), and registers both CRI
// services.
func newGRPCServer(logger *zap.Logger, opts Options) *grpc.Server {
	unary := append([]grpc.UnaryServerInterceptor{logging.UnaryServerInterceptor(logger)}, opts.UnaryInterceptors...)
	unary = append(unary, recoverUnary(logger))
	stream := append([]grpc.StreamServerInterceptor{logging.StreamServerInterceptor(logger)}, opts.StreamInterceptors...)
	stream = append(stream, recoverStream(logger))
	srv := grpc.NewServer(
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.ChainUnaryInterceptor(unary...),
		grpc.ChainStreamInterceptor(stream...),
	)
	runtimeapi.RegisterRuntimeServiceServer(srv, opts.Runtime)
	runtimeapi.RegisterImageServiceServer(srv, opts.Image)
	return srv
}

func (s *Server) serve() {
	defer close(s.served)
	close(s.ready)
	err := s.grpc.Serve(s.lis)
	select {
	case <-s.closing:
		return
	default:
	}
	if err == nil {
		err = errors.New("gRPC Serve returned without Close")
	}
	err = fmt.Errorf("serving CRI on %s: %w", s.path, err)
	s.logger.Error("CRI server stopped unexpectedly", zap.Error(err))
	s.errc <- err
}

func (s *Server) closeOnDone(ctx context.Context) {
	select {
	case <-ctx.Done():
		if err := s.Close(); err != nil {
			s.logger.Error("closing CRI server after context end", zap.Error(err))
		}
	case <-s.served:
	}
}

// Ready is closed once the server is serving.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Err receives one error if serving stops without Close. It is never closed.
func (s *Server) Err() <-chan error { return s.errc }

// Addr returns the socket path.
func (s *Server) Addr() string { return s.path }

// Close stops the server: a graceful stop bounded by the shutdown timeout,
// then a hard stop, then removal of the socket file. It is safe to call more
// than once and from several goroutines; every call returns the first
// call's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	close(s.closing)
	s.stop()
	<-s.served
	if err := os.Remove(s.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing socket %s: %w", s.path, err)
	}
	s.logger.Info("CRI server stopped")
	return nil
}

// stop runs GracefulStop and falls back to Stop after the shutdown timeout.
func (s *Server) stop() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer logging.HandleCrash(s.logger, "CRI server stop")
		s.grpc.GracefulStop()
	}()
	timer := time.NewTimer(s.shutdownTimeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		s.logger.Warn("graceful stop timed out, cutting off in-flight calls",
			zap.Duration("timeout", s.shutdownTimeout))
		s.grpc.Stop()
		<-done
	}
}
