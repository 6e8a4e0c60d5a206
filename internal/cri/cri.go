package cri

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	internalapi "k8s.io/cri-api/pkg/apis"
	criclient "k8s.io/cri-client/pkg"
	criutil "k8s.io/cri-client/pkg/util"
	"k8s.io/klog/v2"
)

// DefaultTimeout is the kubelet's default --runtime-request-timeout.
const DefaultTimeout = 2 * time.Minute

// endpointPollInterval is how often an endpoint that refuses connections is
// tried again while waiting for it.
const endpointPollInterval = 100 * time.Millisecond

// ErrUnreachable is returned (wrapped, with the endpoint) when nothing accepts
// connections at the endpoint within Options.Timeout.
var ErrUnreachable = errors.New("CRI endpoint unreachable")

// Options configures a runtime or image service client.
type Options struct {
	// Endpoint is the runtime's address, e.g. "unix:///var/run/dockershim.sock".
	Endpoint string
	// Timeout is the per-call deadline (--runtime-request-timeout); it also
	// bounds connecting. Zero means DefaultTimeout.
	Timeout time.Duration
	// Registerer receives the runtime operation metrics; nil means no metrics.
	// Several clients may share one Registerer.
	Registerer prometheus.Registerer
	// TracerProvider exports a span per RPC (the kubelet's tracing
	// configuration); nil means none. Spans are children of the caller's.
	TracerProvider trace.TracerProvider
	// Logger is used while connecting; nil means zap.NewNop().
	Logger *zap.Logger
}

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if o.Endpoint == "" {
		return o, errors.New("cri: Options.Endpoint is required")
	}
	if o.Timeout < 0 {
		return o, fmt.Errorf("cri: Options.Timeout must not be negative, got %s", o.Timeout)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	return o, nil
}

// NewRuntimeService dials opts.Endpoint, waits up to opts.Timeout for it to
// accept connections, and checks the runtime with Version. Errors name the
// endpoint.
func NewRuntimeService(ctx context.Context, opts Options) (internalapi.RuntimeService, error) {
	return connect(ctx, opts, "runtime", func(ctx context.Context, opts Options, tp trace.TracerProvider) (internalapi.RuntimeService, error) {
		b := criclient.NewRemoteRuntimeServiceBuilder().WithEndpoint(opts.Endpoint).WithConnectionTimeout(opts.Timeout)
		if tp != nil {
			b = b.WithTracerProvider(tp)
		}
		return b.Build(ctx)
	})
}

// NewImageService dials opts.Endpoint, waits up to opts.Timeout for it to
// accept connections, and checks the image service with ImageFsInfo. Errors
// name the endpoint.
func NewImageService(ctx context.Context, opts Options) (internalapi.ImageManagerService, error) {
	return connect(ctx, opts, "image", func(ctx context.Context, opts Options, tp trace.TracerProvider) (internalapi.ImageManagerService, error) {
		b := criclient.NewRemoteImageServiceBuilder().WithEndpoint(opts.Endpoint).WithConnectionTimeout(opts.Timeout)
		if tp != nil {
			b = b.WithTracerProvider(tp)
		}
		return b.Build(ctx)
	})
}

// connect applies the defaults, waits for the endpoint and calls build with
// the defaulted options and the TracerProvider of the RPCs' spans: the
// metrics one, the exporting one, both, or nil (cri-client's default) for
// neither. build runs cri-client's own validation RPC.
func connect[T any](ctx context.Context, opts Options, service string, build func(context.Context, Options, trace.TracerProvider) (T, error)) (T, error) {
	var zero T
	opts, err := opts.withDefaults()
	if err != nil {
		return zero, err
	}
	var tp trace.TracerProvider
	if opts.Registerer != nil {
		m, err := newMetricsTracerProvider(opts.Registerer)
		if err != nil {
			return zero, err
		}
		tp = m
		if opts.TracerProvider != nil {
			tp = &teeTracerProvider{export: opts.TracerProvider, metrics: m}
		}
	} else if opts.TracerProvider != nil {
		tp = opts.TracerProvider
	}
	ctx, cancel := connectContext(ctx, opts, service)
	defer cancel()
	if err := waitForEndpoint(ctx, opts); err != nil {
		return zero, err
	}
	svc, err := build(ctx, opts, tp)
	if err != nil {
		return zero, fmt.Errorf("CRI %s service at %q: %w", service, opts.Endpoint, err)
	}
	return svc, nil
}

// connectContext bounds connecting and validating by opts.Timeout and routes
// cri-client's connection logs (klog.FromContext) to opts.Logger.
func connectContext(ctx context.Context, opts Options, service string) (context.Context, context.CancelFunc) {
	logger := opts.Logger.Named("cri").With(zap.String("endpoint", opts.Endpoint), zap.String("service", service))
	ctx = klog.NewContext(ctx, zapr.NewLogger(logger))
	return context.WithTimeout(ctx, opts.Timeout)
}

// waitForEndpoint returns once something accepts a connection at
// opts.Endpoint, retrying until ctx ends. A runtime that is still starting is
// thus waited for instead of failing the first RPC.
func waitForEndpoint(ctx context.Context, opts Options) error {
	addr, dial, err := criutil.GetAddressAndDialer(opts.Endpoint)
	if err != nil {
		return fmt.Errorf("CRI endpoint %q: %w", opts.Endpoint, err)
	}
	ticker := time.NewTicker(endpointPollInterval)
	defer ticker.Stop()
	var cause error // the last dial error, unless that was ctx ending
	for {
		conn, err := dial(ctx, addr)
		if err == nil {
			return conn.Close()
		}
		if cause == nil {
			opts.Logger.Info("Waiting for the CRI endpoint", zap.String("endpoint", opts.Endpoint),
				zap.Duration("timeout", opts.Timeout), zap.Error(err))
		}
		if cause == nil || ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			cause = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %q did not accept connections within %s: %w",
				ErrUnreachable, opts.Endpoint, opts.Timeout, cause)
		case <-ticker.C:
		}
	}
}
