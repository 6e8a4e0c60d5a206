package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	goruntime "runtime"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	cliflag "k8s.io/component-base/cli/flag"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/kubelet-dockershim/kubelet/internal/app/options"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/stats"
	"github.com/kubelet-dockershim/kubelet/internal/kubeletserver"
	"github.com/kubelet-dockershim/kubelet/internal/kubeletserver/auth"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// apiServerDeps are what the kubelet API serves from.
type apiServerDeps struct {
	host         kubeletserver.HostInterface
	health       kubeletserver.HealthChecker
	gatherer     prometheus.Gatherer
	registerer   prometheus.Registerer // the serving certificate's series
	stats        statsServer
	probeMetrics prometheus.Gatherer
	nodeName     string
	nodeIPs      []net.IP
	conn         *apiConn
	tracing      trace.TracerProvider // nil: no request spans
	logger       *zap.Logger
}

// statsServer serves /stats/, /metrics/resource and /metrics/cadvisor
// (internal/kubelet/stats).
type statsServer interface {
	Handler() http.Handler
	ResourceMetrics() prometheus.Gatherer
	CadvisorMetrics(o stats.CadvisorOptions) http.Handler
}

// startAPIServers starts the kubelet API (HTTPS on --address:--port, behind
// authentication and authorization) and, when --read-only-port is set, the
// read-only HTTP server. It returns a function that stops both.
func startAPIServers(ctx context.Context, cfg *Config, d apiServerDeps) (func(), error) {
	var servers []*kubeletserver.Server
	stop := func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}
	opts := kubeletserver.APIOptions{
		Host: d.host, Health: d.health, Gatherer: d.gatherer, ProbeMetrics: d.probeMetrics,
		Configz: func() any {
			return map[string]any{"kubeletconfig": cfg.Kubelet, options.NotHonoredKey: cfg.NotHonoured()}
		},
		LogDir: "/var/log", Logger: d.logger.Named("server"), TracerProvider: d.tracing,
		DisableDebugging:  !*cfg.Kubelet.EnableDebuggingHandlers,
		DisableSystemLogs: !*cfg.Kubelet.EnableSystemLogHandler,
		SystemLogQuery:    ptr.Deref(cfg.Kubelet.EnableSystemLogQuery, false), // NodeLogQuery is locked on
		DisableProfiling:  !*cfg.Kubelet.EnableProfilingHandler,
		DisableDebugFlags: !*cfg.Kubelet.EnableDebugFlagsHandler,
		SetVerbosity:      func(v string) (string, error) { return logging.SetVerbosity(cfg.logLevel, v) },
	}
	if *cfg.Kubelet.EnableDebuggingHandlers && *cfg.Kubelet.EnableProfilingHandler && cfg.Kubelet.EnableContentionProfiling {
		goruntime.SetBlockProfileRate(1)
	}
	if d.stats != nil {
		opts.Stats, opts.ResourceMetrics = d.stats.Handler(), d.stats.ResourceMetrics()
		// One handler (and one set of held cgroup files) for both servers.
		opts.CadvisorMetrics = d.stats.CadvisorMetrics(stats.CadvisorOptions{SandboxImage: cfg.PodInfraContainerImage})
	}
	if *cfg.Kubelet.EnableServer {
		filter, tlsCfg, err := apiSecurity(ctx, cfg, d)
		if err != nil {
			return stop, err
		}
		if filter != nil {
			opts.Addr = net.JoinHostPort(cfg.Kubelet.Address, strconv.Itoa(int(cfg.Kubelet.Port)))
			opts.Filter, opts.TLSConfig = filter, tlsCfg
			s, err := kubeletserver.StartAPI(ctx, opts)
			if err != nil {
				return stop, fmt.Errorf("kubelet API on %s: %w", opts.Addr, err)
			}
			servers = append(servers, s)
			d.logger.Info("kubelet API serving", zap.String("addr", s.Addr()))
		}
	}
	if cfg.Kubelet.ReadOnlyPort > 0 {
		ro := opts
		ro.Addr = net.JoinHostPort(cfg.Kubelet.Address, strconv.Itoa(int(cfg.Kubelet.ReadOnlyPort)))
		s, err := kubeletserver.StartReadOnly(ctx, ro)
		if err != nil {
			return stop, fmt.Errorf("read-only port %s: %w", ro.Addr, err)
		}
		servers = append(servers, s)
		d.logger.Info("read-only kubelet API serving (no authentication)", zap.String("addr", s.Addr()))
	}
	return stop, nil
}

// apiSecurity builds the API's serving TLS config and its authn/authz filter.
// Webhook authentication or authorization needs an API server: without one
// (a standalone kubelet) the API is not started and the reason is logged
// (nil filter), unless authorization is AlwaysAllow.
func apiSecurity(ctx context.Context, cfg *Config, d apiServerDeps) (func(http.Handler) http.Handler, *tls.Config, error) {
	a := cfg.Kubelet.Authentication
	mode := string(cfg.Kubelet.Authorization.Mode)
	if d.conn == nil && (mode == auth.ModeWebhook || *a.Webhook.Enabled && mode != auth.ModeAlwaysAllow) {
		d.logger.Warn("kubelet API not started: webhook authentication/authorization needs an API server (--kubeconfig); set authorization.mode AlwaysAllow to serve it standalone",
			zap.String("authorization-mode", mode))
		return nil, nil, nil
	}
	opts := auth.Options{
		NodeName: d.nodeName, ClientCAFile: a.X509.ClientCAFile, AnonymousEnabled: *a.Anonymous.Enabled,
		WebhookAuthnEnabled: *a.Webhook.Enabled && d.conn != nil, WebhookAuthnCacheTTL: a.Webhook.CacheTTL.Duration,
		AuthorizationMode:           mode,
		WebhookAuthzAuthorizedTTL:   cfg.Kubelet.Authorization.Webhook.CacheAuthorizedTTL.Duration,
		WebhookAuthzUnauthorizedTTL: cfg.Kubelet.Authorization.Webhook.CacheUnauthorizedTTL.Duration,
		Logger:                      d.logger.Named("auth"),
	}
	serving := auth.ServingOptions{
		CertFile: cfg.Kubelet.TLSCertFile, KeyFile: cfg.Kubelet.TLSPrivateKeyFile, CertDir: cfg.CertDirectory,
		NodeName: d.nodeName, Hostnames: []string{d.nodeName}, IPs: d.nodeIPs, ServerTLSBootstrap: cfg.Kubelet.ServerTLSBootstrap,
		Registerer: d.registerer, Logger: d.logger.Named("serving"),
	}
	if err := setTLSOptions(&serving, &cfg.Kubelet, d.logger); err != nil {
		return nil, nil, err
	}
	if d.conn != nil {
		opts.Client, serving.Client = d.conn.client, d.conn.client
	}
	if cfg.Kubelet.ServerTLSBootstrap && d.conn == nil {
		return nil, nil, errors.New("serverTLSBootstrap (--rotate-server-certificates) needs an API server (--kubeconfig)")
	}
	authn, err := auth.New(opts)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet API authentication/authorization: %w", err)
	}
	go func() {
		defer logging.HandleCrash(d.logger, "kubelet API authentication")
		authn.Run(ctx)
	}()
	tlsCfg, err := auth.ServingTLSConfig(ctx, serving)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet API serving certificate: %w", err)
	}
	return authn.Filter, tlsCfg, nil
}

// setTLSOptions applies tlsMinVersion, tlsCipherSuites and
// tlsCurvePreferences (validated before) to the serving options; an insecure
// cipher is named in a warning, as upstream.
func setTLSOptions(o *auth.ServingOptions, k *kubeletv1beta1.KubeletConfiguration, logger *zap.Logger) error {
	suites, err := cliflag.TLSCipherSuites(k.TLSCipherSuites)
	if err != nil {
		return fmt.Errorf("tlsCipherSuites: %w", err)
	}
	insecure := map[string]bool{}
	for _, c := range tls.InsecureCipherSuites() {
		insecure[c.Name] = true
	}
	for _, name := range k.TLSCipherSuites {
		if insecure[name] {
			logger.Warn(fmt.Sprintf("Use of insecure cipher '%s' detected.", name))
		}
	}
	o.CipherSuites = suites
	if o.TLSMinVersion, err = cliflag.TLSVersion(k.TLSMinVersion); err != nil {
		return fmt.Errorf("tlsMinVersion: %w", err)
	}
	for _, c := range k.TLSCurvePreferences {
		o.CurvePreferences = append(o.CurvePreferences, tls.CurveID(c))
	}
	return nil
}
