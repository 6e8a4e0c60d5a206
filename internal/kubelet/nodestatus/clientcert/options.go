package clientcert

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/zap"
)

// Options configures Bootstrap and NewClientConfig; both take the same value.
type Options struct {
	// KubeconfigPath is --kubeconfig: the node's credentials, written by
	// Bootstrap when they are missing or no longer usable. Required.
	KubeconfigPath string
	// BootstrapKubeconfigPath is --bootstrap-kubeconfig ("" = none): the
	// credentials used to request a client certificate.
	BootstrapKubeconfigPath string
	// CertDir is where certificates and keys are stored (<root-dir>/pki).
	// Required to bootstrap or rotate.
	CertDir string
	// NodeName is the node the certificate is for (CN system:node:<NodeName>).
	// Required to bootstrap or rotate.
	NodeName string
	// RotateCertificates is rotateCertificates of the KubeletConfiguration:
	// renew the client certificate before it expires.
	RotateCertificates bool
	// Registerer receives, with rotation on, upstream's
	// kubelet_certificate_manager_client_ttl_seconds and
	// kubelet_certificate_manager_client_expiration_renew_errors; nil: not
	// registered.
	Registerer prometheus.Registerer
	// Logger receives progress and errors; nil = zap.NewNop().
	Logger *zap.Logger
}

// pairPrefix names the certificate store's files: kubelet-client-current.pem
// and kubelet-client-<timestamp>.pem (as upstream).
const pairPrefix = "kubelet-client"

// pendingKeyFile is the key of a certificate request not yet signed, kept in
// CertDir so that a restart during approval reuses it (as upstream).
const pendingKeyFile = pairPrefix + ".key.tmp"

func (o Options) logger() *zap.Logger {
	if o.Logger == nil {
		return zap.NewNop()
	}
	return o.Logger
}

// validateForCSR checks what requesting a certificate needs.
func (o Options) validateForCSR() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, errors.New("no node name: the client certificate is issued for system:node:<node name>"))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("no certificate directory (--cert-dir) to keep the client certificate in"))
	}
	return errors.Join(errs...)
}
