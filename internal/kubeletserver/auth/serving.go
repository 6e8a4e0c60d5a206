package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kubelet-dockershim/kubelet/internal/logging"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/keyutil"
	"k8s.io/klog/v2"
)

// Names in the certificate directory (upstream).
const (
	// SelfSignedCertFile and SelfSignedKeyFile hold the self-signed pair.
	SelfSignedCertFile = "kubelet.crt"
	SelfSignedKeyFile  = "kubelet.key"
	// ServingPairPrefix names the pairs of serverTLSBootstrap:
	// kubelet-server-<timestamp>.pem and kubelet-server-current.pem.
	ServingPairPrefix = "kubelet-server"
)

// ServingOptions configures the serving certificate of the kubelet API.
type ServingOptions struct {
	// CertFile and KeyFile (--tls-cert-file, --tls-private-key-file): the
	// serving pair, reloaded when the files change. With ServerTLSBootstrap
	// they only seed the certificate store while it is empty.
	CertFile, KeyFile string
	// CertDir (--cert-dir) holds the self-signed pair or the bootstrapped
	// pairs.
	CertDir  string
	NodeName string
	// Hostnames and IPs are the subject alternative names of the self-signed
	// certificate and of the certificate requests; a request needs at least
	// one IP (as upstream).
	Hostnames []string
	IPs       []net.IP
	// Addresses, when set, replaces Hostnames and IPs for the certificate
	// requests and is called for each (upstream: the node's last observed
	// addresses); a change makes the manager request a new certificate.
	Addresses func() (hostnames []string, ips []net.IP)
	// ServerTLSBootstrap requests the serving certificate from the
	// kubernetes.io/kubelet-serving signer through Client and renews it
	// before it expires. Someone must approve the requests: the
	// controller-manager does not approve serving certificates.
	ServerTLSBootstrap bool
	Client             kubernetes.Interface
	// TLSMinVersion is the lowest TLS version served (tls.VersionTLS12 when
	// 0); below TLS 1.2 is refused.
	TLSMinVersion uint16
	// CipherSuites and CurvePreferences, when set, replace Go's defaults
	// (tlsCipherSuites, tlsCurvePreferences).
	CipherSuites     []uint16
	CurvePreferences []tls.CurveID
	// Registerer receives, with ServerTLSBootstrap, upstream's serving
	// certificate series (kubelet_certificate_manager_server_*,
	// kubelet_server_expiration_renew_errors); nil: not registered.
	Registerer prometheus.Registerer
	Logger     *zap.Logger
}

// ServingTLSConfig returns the TLS configuration of the kubelet API server.
// Its certificate comes, as upstream's does, from:
//  1. with ServerTLSBootstrap: a client-go certificate manager (signer
//     kubernetes.io/kubelet-serving, CN system:node:<NodeName>, O
//     system:nodes, SANs Hostnames and IPs) keeping its pairs in CertDir;
//     until a request is approved and signed, handshakes fail with "no
//     serving certificate available for the kubelet";
//  2. else CertFile and KeyFile;
//  3. else CertDir/kubelet.crt and kubelet.key, a self-signed pair created
//     when they cannot be read and reused afterwards.
//
// In cases 2 and 3 the files are reloaded when they change. The manager and
// the file watch run until ctx ends. The configuration requests (but does not
// require or verify) a client certificate, for Auth's x509 authentication.
func ServingTLSConfig(ctx context.Context, o ServingOptions) (*tls.Config, error) {
	logger := o.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	logger = logger.Named("serving-cert")
	minVersion := o.TLSMinVersion
	if minVersion == 0 {
		minVersion = tls.VersionTLS12
	}
	if minVersion < tls.VersionTLS12 {
		return nil, fmt.Errorf("TLS minimum version %s: the kubelet API serves TLS 1.2 or newer", tls.VersionName(minVersion))
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return nil, errors.New("--tls-cert-file and --tls-private-key-file go together: give both or neither")
	}
	current, err := servingCertificate(ctx, o, logger)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:       minVersion,
		CipherSuites:     o.CipherSuites,
		CurvePreferences: o.CurvePreferences,
		// Populate PeerCertificates for x509 authentication, but leave the
		// verification to Auth (against the reloaded client CA).
		ClientAuth: tls.RequestClientCert,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := current(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate available for the kubelet")
		},
	}, nil
}

// servingCertificate starts the source of the serving certificate chosen by
// o and returns its current-certificate function.
func servingCertificate(ctx context.Context, o ServingOptions, logger *zap.Logger) (func() *tls.Certificate, error) {
	if o.ServerTLSBootstrap {
		m, err := startServingCertManager(ctx, o, logger)
		if err != nil {
			return nil, err
		}
		return m.Current, nil
	}
	certFile, keyFile := o.CertFile, o.KeyFile
	if certFile == "" {
		var err error
		if certFile, keyFile, err = ensureSelfSigned(o, logger); err != nil {
			return nil, err
		}
	}
	f, err := newFileCert(certFile, keyFile, logger)
	if err != nil {
		return nil, err
	}
	go func() {
		defer logging.HandleCrash(logger, "serving certificate reload")
		f.content.Run(klog.NewContext(ctx, zapr.NewLogger(logger)), 1)
	}()
	return f.current.Load, nil
}

// ensureSelfSigned returns CertDir's self-signed pair, creating it when the
// files cannot be read (upstream InitializeTLS).
func ensureSelfSigned(o ServingOptions, logger *zap.Logger) (certFile, keyFile string, err error) {
	if o.CertDir == "" {
		return "", "", errors.New("no --cert-dir for the self-signed serving certificate (and no --tls-cert-file)")
	}
	certFile = filepath.Join(o.CertDir, SelfSignedCertFile)
	keyFile = filepath.Join(o.CertDir, SelfSignedKeyFile)
	ok, err := certutil.CanReadCertAndKey(certFile, keyFile)
	if err != nil {
		return "", "", fmt.Errorf("self-signed serving certificate: %w", err)
	}
	if ok {
		logger.Info("using the self-signed serving certificate", zap.String("cert", certFile))
		return certFile, keyFile, nil
	}
	host := o.NodeName
	if len(o.Hostnames) > 0 {
		host = o.Hostnames[0]
	}
	if host == "" {
		return "", "", errors.New("self-signed serving certificate: no NodeName or hostname to issue it for")
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(host, o.IPs, o.Hostnames)
	if err != nil {
		return "", "", fmt.Errorf("generating the self-signed serving certificate: %w", err)
	}
	if err := os.MkdirAll(o.CertDir, 0o755); err != nil {
		return "", "", fmt.Errorf("certificate directory: %w", err)
	}
	if err := keyutil.WriteKey(keyFile, keyPEM); err != nil {
		return "", "", fmt.Errorf("writing the self-signed serving key: %w", err)
	}
	if err := certutil.WriteCert(certFile, certPEM); err != nil {
		return "", "", fmt.Errorf("writing the self-signed serving certificate: %w", err)
	}
	logger.Info("created a self-signed serving certificate", zap.String("cert", certFile), zap.String("host", host))
	return certFile, keyFile, nil
}

// fileCert is a serving pair read from files and reloaded when they change.
type fileCert struct {
	content           *dynamiccertificates.DynamicCertKeyPairContent
	certFile, keyFile string
	current           atomic.Pointer[tls.Certificate]
	logger            *zap.Logger
}

// newFileCert loads the pair; content.Run watches the files.
func newFileCert(certFile, keyFile string, logger *zap.Logger) (*fileCert, error) {
	content, err := dynamiccertificates.NewDynamicServingContentFromFiles("kubelet-server-cert-files", certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate %s, key %s: %w", certFile, keyFile, err)
	}
	f := &fileCert{content: content, certFile: certFile, keyFile: keyFile, logger: logger}
	if err := f.load(); err != nil {
		return nil, err
	}
	content.AddListener(f)
	return f, nil
}

// Enqueue is called when the files changed.
func (f *fileCert) Enqueue() {
	if err := f.load(); err != nil {
		f.logger.Error("keeping the previous serving certificate", zap.Error(err))
		return
	}
	f.logger.Info("serving certificate reloaded", zap.String("cert", f.certFile))
}

// load parses the current content into the served certificate.
func (f *fileCert) load() error {
	certPEM, keyPEM := f.content.CurrentCertKeyContent()
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("serving certificate %s, key %s: %w", f.certFile, f.keyFile, err)
	}
	f.current.Store(&c)
	return nil
}

// startServingCertManager starts the certificate manager of
// serverTLSBootstrap (upstream NewKubeletServerCertificateManager); it stops
// when ctx ends.
func startServingCertManager(ctx context.Context, o ServingOptions, logger *zap.Logger) (certificate.Manager, error) {
	switch {
	case o.Client == nil:
		return nil, errors.New("serverTLSBootstrap needs an API client")
	case o.NodeName == "":
		return nil, errors.New("serverTLSBootstrap needs the node name")
	case o.CertDir == "":
		return nil, errors.New("serverTLSBootstrap needs --cert-dir to keep the certificates in")
	case o.Addresses == nil && len(o.IPs) == 0:
		return nil, errors.New("serverTLSBootstrap needs at least one IP address for the serving certificate")
	}
	if err := os.MkdirAll(o.CertDir, 0o755); err != nil {
		return nil, fmt.Errorf("certificate directory: %w", err)
	}
	store, err := certificate.NewFileStoreWithLogger(zapr.NewLogger(logger).V(1), ServingPairPrefix, o.CertDir, o.CertDir, o.CertFile, o.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate store in %s: %w", o.CertDir, err)
	}
	client := o.Client
	met, err := newServingCertMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	mctx := klog.NewContext(ctx, zapr.NewLogger(logger.Named("manager")))
	m, err := certificate.NewManager(&certificate.Config{
		CertificateRenewFailure: met.renewErrors,
		CertificateRotation:     met.rotation,
		ClientsetFn:             func(*tls.Certificate) (kubernetes.Interface, error) { return client, nil },
		GetTemplate:             servingTemplate(o),
		SignerName:              certificatesv1.KubeletServingSignerName,
		GetUsages:               certificate.DefaultKubeletServingGetUsages,
		CertificateStore:        store,
		Name:                    "kubelet-serving",
		Ctx:                     &mctx,
	})
	if err != nil {
		return nil, fmt.Errorf("serving certificate manager: %w", err)
	}
	if err := registerServingTTL(o.Registerer, m); err != nil {
		return nil, err
	}
	fields := []zap.Field{zap.String("certDir", o.CertDir)}
	if c := m.Current(); c != nil && c.Leaf != nil {
		fields = append(fields, zap.Time("notAfter", c.Leaf.NotAfter))
	}
	logger.Info("serving certificate from certificate signing requests (serverTLSBootstrap)", fields...)
	m.Start()
	return m, nil
}

// uniqueSorted returns items without empty or repeated keys, sorted by key,
// so that equal address sets give equal templates.
func uniqueSorted[T any](items []T, key func(T) string) []T {
	seen := make(map[string]bool, len(items))
	out := make([]T, 0, len(items))
	for _, it := range items {
		if k := key(it); k != "" && k != "<nil>" && !seen[k] {
			seen[k] = true
			out = append(out, it)
		}
	}
	slices.SortFunc(out, func(a, b T) int { return strings.Compare(key(a), key(b)) })
	return out
}

// servingTemplate returns the manager's template function: nil (no request)
// while there is no IP to request for.
func servingTemplate(o ServingOptions) func() *x509.CertificateRequest {
	return func() *x509.CertificateRequest {
		hostnames, ips := o.Hostnames, o.IPs
		if o.Addresses != nil {
			hostnames, ips = o.Addresses()
		}
		ips = uniqueSorted(ips, net.IP.String)
		if len(ips) == 0 {
			return nil
		}
		return &x509.CertificateRequest{
			Subject:     pkix.Name{CommonName: "system:node:" + o.NodeName, Organization: []string{"system:nodes"}},
			DNSNames:    uniqueSorted(hostnames, func(h string) string { return h }),
			IPAddresses: ips,
		}
	}
}
