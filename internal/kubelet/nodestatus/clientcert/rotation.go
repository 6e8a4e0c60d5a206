package clientcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/zapr"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/klog/v2"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// rotationCheckPeriod is how often a rotating client compares the manager's
// certificate with the one its connections use (upstream: 10 s); a store
// update triggers a check at once.
const rotationCheckPeriod = 10 * time.Second

// NewClientConfig loads opts.KubeconfigPath into a rest.Config.
//
// When opts.RotateCertificates is set and the kubeconfig authenticates with a
// client certificate, a client-go certificate.Manager runs until ctx ends: it
// keeps the pair in the CertDir file store (the kubeconfig's certificate, or
// inline data, seeds it when the store is empty), and requests a new
// certificate (same subject and signer as Bootstrap) at 70 to 90% of the
// current one's lifetime, with the kubelet's own credentials, or with the
// bootstrap kubeconfig when the current certificate has expired. The returned
// config then has its own Transport: every TLS handshake presents the
// manager's current certificate and all connections are closed when it
// changes, so that requests re-authenticate with the new one. Callers may set
// QPS, Burst, ContentType, UserAgent and the like, but no TLS options.
//
// Otherwise the config is the kubeconfig's, unchanged.
func NewClientConfig(ctx context.Context, opts Options) (*rest.Config, error) {
	logger := opts.logger()
	if opts.KubeconfigPath == "" {
		return nil, errors.New("no --kubeconfig to build the API client from")
	}
	cfg, err := loadRESTConfig(opts.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	hasCert := cfg.CertFile != "" || len(cfg.CertData) > 0
	if !opts.RotateCertificates || !hasCert {
		logger.Info("client certificate rotation off", zap.Bool("rotateCertificates", opts.RotateCertificates),
			zap.Bool("clientCertificate", hasCert))
		return cfg, nil
	}
	if err := opts.validateForCSR(); err != nil {
		return nil, fmt.Errorf("client certificate rotation: %w", err)
	}
	return startRotation(ctx, cfg, opts, logger)
}

// rotatingClient is what stands behind a config returned with rotation on.
// Its fields are set before the manager starts and only read after.
type rotatingClient struct {
	manager       certificate.Manager
	dialer        *connrotation.Dialer
	config        *rest.Config // the rotating config; also used for requests of the manager
	bootstrapPath string
	updated       chan struct{} // the store has just stored a new pair
	logger        *zap.Logger
}

// startRotation builds the rotating config over base, then starts the
// manager and the connection watch under ctx.
func startRotation(ctx context.Context, base *rest.Config, opts Options, logger *zap.Logger) (*rest.Config, error) {
	r := &rotatingClient{
		dialer:        connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext),
		bootstrapPath: opts.BootstrapKubeconfigPath,
		updated:       make(chan struct{}, 1),
		logger:        logger,
	}
	cfg, err := rotatingConfig(base, r.current, r.dialer.DialContext)
	if err != nil {
		return nil, err
	}
	r.config = cfg
	fileStore, err := newFileStore(opts.CertDir, base.CertFile, base.KeyFile, logger)
	if err != nil {
		return nil, err
	}
	subject := nodeSubject(opts.NodeName)
	renewErrors := prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "kubelet", Subsystem: "certificate_manager", Name: "client_expiration_renew_errors",
		Help: "[ALPHA] Counter of certificate renewal errors.",
	})
	mctx := klog.NewContext(ctx, zapr.NewLogger(logger.Named("manager")))
	r.manager, err = certificate.NewManager(&certificate.Config{
		CertificateRenewFailure: renewErrors,
		ClientsetFn:             r.clientset,
		Template:                &x509.CertificateRequest{Subject: subject},
		SignerName:              certificatesv1.KubeAPIServerClientKubeletSignerName,
		GetUsages:               certificate.DefaultKubeletClientGetUsages,
		BootstrapCertificatePEM: base.CertData,
		BootstrapKeyPEM:         base.KeyData,
		CertificateStore:        &notifyingStore{FileStore: fileStore, updated: r.updated},
		Name:                    "client",
		Ctx:                     &mctx,
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate manager: %w", err)
	}
	if err := registerClientMetrics(opts.Registerer, r.manager, renewErrors); err != nil {
		return nil, err
	}
	rot := &connRotator{current: r.manager.Current, closeAll: r.dialer.CloseAll, logger: logger, last: r.manager.Current()}
	fields := []zap.Field{zap.String("certDir", opts.CertDir), zap.String("subject", subject.String())}
	if c := rot.last; c != nil && c.Leaf != nil {
		fields = append(fields, zap.Time("notAfter", c.Leaf.NotAfter))
	}
	logger.Info("client certificate rotation on", fields...)
	r.manager.Start()
	go func() {
		defer logging.HandleCrash(logger, "client certificate rotation")
		r.watch(ctx, rot)
	}()
	return rest.CopyConfig(cfg), nil
}

// current is the certificate every TLS handshake presents.
func (r *rotatingClient) current() *tls.Certificate { return r.manager.Current() }

// clientset is the manager's ClientsetFunc: the node's own credentials while
// it has a valid certificate, else the bootstrap kubeconfig (as upstream).
func (r *rotatingClient) clientset(current *tls.Certificate) (kubernetes.Interface, error) {
	if current != nil {
		return kubernetes.NewForConfig(r.config)
	}
	if r.bootstrapPath == "" {
		return nil, errors.New("no valid client certificate (expired or missing) to request a new one with, and no --bootstrap-kubeconfig")
	}
	cfg, err := loadRESTConfig(r.bootstrapPath)
	if err != nil {
		return nil, fmt.Errorf("--bootstrap-kubeconfig: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

// watch runs rot's check every rotationCheckPeriod, and soon after every
// store update, until ctx ends.
func (r *rotatingClient) watch(ctx context.Context, rot *connRotator) {
	ticker := time.NewTicker(rotationCheckPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			rot.check()
		case <-r.updated:
			// The manager caches the pair right after storing it: poll
			// briefly for the switch.
			_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 5*time.Second, true,
				func(context.Context) (bool, error) { return rot.check(), nil })
		}
	}
}

// connRotator closes the connections of a client when its certificate changes.
// Only one goroutine calls check.
type connRotator struct {
	current  func() *tls.Certificate
	closeAll func()
	logger   *zap.Logger
	last     *tls.Certificate // the certificate of the last check
	missing  bool             // the last check found no valid certificate (logged once)
}

// check closes every connection when the current certificate is not the one
// of the last check, and reports whether it did.
func (c *connRotator) check() bool {
	cur := c.current()
	if cur == nil {
		if !c.missing {
			c.missing = true
			c.logger.Warn("no valid client certificate (expired or missing): API requests fail until a new one is issued")
		}
		return false
	}
	c.missing = false
	if cur == c.last {
		return false
	}
	c.last = cur
	fields := []zap.Field{}
	if cur.Leaf != nil {
		fields = append(fields, zap.String("subject", cur.Leaf.Subject.String()), zap.Time("notAfter", cur.Leaf.NotAfter))
	}
	c.logger.Info("client certificate rotated, closing connections to use it", fields...)
	c.closeAll()
	return true
}

// rotatingConfig returns a copy of base without credentials whose transport
// presents current() as client certificate at each TLS handshake and dials
// through dial (so that the caller can close every connection).
func rotatingConfig(base *rest.Config, current func() *tls.Certificate, dial connrotation.DialFunc) (*rest.Config, error) {
	cfg := rest.AnonymousClientConfig(base)
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("TLS configuration of %s: %w", base.Host, err)
	}
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	tlsConfig.Certificates = nil
	tlsConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if c := current(); c != nil {
			return c, nil
		}
		return &tls.Certificate{}, nil // no certificate: the server sees an anonymous client
	}
	proxy := http.ProxyFromEnvironment
	if base.Proxy != nil {
		proxy = base.Proxy
	}
	cfg.Transport = utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               proxy,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         dial,
	})
	// The transport enforces TLS; client-go refuses TLS options next to it.
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.Dial, cfg.Proxy = nil, nil
	return cfg, nil
}

// notifyingStore is the file store, telling the watch when it stored a pair.
type notifyingStore struct {
	certificate.FileStore
	updated chan<- struct{}
}

func (s *notifyingStore) Update(cert, key []byte) (*tls.Certificate, error) {
	c, err := s.FileStore.Update(cert, key)
	if err == nil {
		select {
		case s.updated <- struct{}{}:
		default: // a check is already pending
		}
	}
	return c, err
}

// registerClientMetrics registers upstream's client certificate series with
// reg (nil: none): the renewal errors and the TTL, read at each scrape
// (+Inf without a certificate).
func registerClientMetrics(reg prometheus.Registerer, m certificate.Manager, renewErrors prometheus.Counter) error {
	if reg == nil {
		return nil
	}
	ttl := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Subsystem: "kubelet", Name: "certificate_manager_client_ttl_seconds",
		Help: "[ALPHA] Gauge of the TTL (time-to-live) of the Kubelet's client certificate. The value is in seconds until " +
			"certificate expiry (negative if already expired). If client certificate is invalid or unused, the value will be +INF.",
	}, func() float64 {
		c := m.Current()
		if c == nil || c.Leaf == nil {
			return math.Inf(1)
		}
		return math.Trunc(time.Until(c.Leaf.NotAfter).Seconds())
	})
	for _, c := range []prometheus.Collector{renewErrors, ttl} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("client certificate metrics: %w", err)
		}
	}
	return nil
}
