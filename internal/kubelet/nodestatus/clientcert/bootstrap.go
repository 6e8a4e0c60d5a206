package clientcert

import (
	"context"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/certificate/csr"
	"k8s.io/client-go/util/keyutil"
)

// certificateWaitTimeout bounds the wait for a request to be approved and
// signed (upstream: one hour).
const certificateWaitTimeout = time.Hour

// Bootstrap makes sure opts.KubeconfigPath holds usable credentials.
//
// A kubeconfig whose client certificate parses, matches its key and has not
// expired is left alone. Otherwise, with a bootstrap kubeconfig, Bootstrap:
//  1. takes a private key: the key of the store's current pair if any, else
//     the pending key CertDir/kubelet-client.key.tmp, else a new ECDSA P-256
//     key written there (so that a restart during approval reuses the key and
//     finds the same, deterministically named, request);
//  2. creates a CertificateSigningRequest (signer
//     kubernetes.io/kube-apiserver-client-kubelet, CN system:node:<NodeName>,
//     O system:nodes), retrying while the API server is unreachable;
//  3. waits (up to an hour, or until ctx ends) for it to be approved and signed;
//  4. stores the pair with the client-go file store (kubelet-client-<ts>.pem,
//     kubelet-client-current.pem) and removes the pending key;
//  5. writes KubeconfigPath (mode 0600): the bootstrap kubeconfig's server and
//     CA, client certificate and key CertDir/kubelet-client-current.pem.
//
// Without a bootstrap kubeconfig a kubeconfig that authenticates otherwise
// (token, exec plugin) is accepted; a missing or unusable one is an error.
func Bootstrap(ctx context.Context, opts Options) error {
	logger := opts.logger()
	if opts.KubeconfigPath == "" {
		return errors.New("no --kubeconfig: it is where the node's API server credentials are read from (and written to by TLS bootstrap)")
	}
	state, why := checkKubeconfig(opts.KubeconfigPath, time.Now())
	switch {
	case state == kubeconfigValid:
		logger.Info("kubeconfig has a valid client certificate, no TLS bootstrap needed", zap.String("kubeconfig", opts.KubeconfigPath))
		return nil
	case opts.BootstrapKubeconfigPath != "":
	case state == kubeconfigMissing:
		return fmt.Errorf("--kubeconfig %s does not exist and no --bootstrap-kubeconfig is set: give an existing --kubeconfig, or a --bootstrap-kubeconfig to request a client certificate with", opts.KubeconfigPath)
	case state == kubeconfigNoCert:
		logger.Info("kubeconfig authenticates without a client certificate, no TLS bootstrap", zap.String("kubeconfig", opts.KubeconfigPath))
		return nil
	default:
		return fmt.Errorf("--kubeconfig %s is not usable and no --bootstrap-kubeconfig is set to request a new client certificate: %w", opts.KubeconfigPath, why)
	}
	if err := opts.validateForCSR(); err != nil {
		return fmt.Errorf("TLS bootstrap with --bootstrap-kubeconfig %s: %w", opts.BootstrapKubeconfigPath, err)
	}
	logger.Info("starting TLS bootstrap", zap.String("kubeconfig", opts.KubeconfigPath), zap.Stringer("state", state),
		zap.NamedError("reason", why), zap.String("bootstrapKubeconfig", opts.BootstrapKubeconfigPath))
	return bootstrap(ctx, opts, logger)
}

// bootstrap runs steps 1 to 5 of Bootstrap.
func bootstrap(ctx context.Context, opts Options, logger *zap.Logger) error {
	bootCfg, err := loadRESTConfig(opts.BootstrapKubeconfigPath)
	if err != nil {
		return fmt.Errorf("--bootstrap-kubeconfig: %w", err)
	}
	client, err := kubernetes.NewForConfig(bootCfg)
	if err != nil {
		return fmt.Errorf("--bootstrap-kubeconfig %s: client: %w", opts.BootstrapKubeconfigPath, err)
	}
	if err := os.MkdirAll(opts.CertDir, 0o755); err != nil {
		return fmt.Errorf("certificate directory: %w", err)
	}
	store, err := newFileStore(opts.CertDir, "", "", logger)
	if err != nil {
		return err
	}
	pendingPath := filepath.Join(opts.CertDir, pendingKeyFile)
	keyPEM, err := bootstrapKey(store, pendingPath)
	if err != nil {
		return err
	}
	certPEM, err := requestClientCertificate(ctx, client, keyPEM, opts.NodeName, logger)
	if err != nil {
		return fmt.Errorf("requesting a client certificate with --bootstrap-kubeconfig %s: %w", opts.BootstrapKubeconfigPath, err)
	}
	cert, err := store.Update(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("storing the client certificate in %s: %w", opts.CertDir, err)
	}
	if err := os.Remove(pendingPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		logger.Warn("cannot remove the pending private key", zap.String("path", pendingPath), zap.Error(err))
	}
	if err := writeKubeconfig(opts.KubeconfigPath, nodeKubeconfig(bootCfg, store.CurrentPath())); err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", opts.KubeconfigPath, err)
	}
	logger.Info("TLS bootstrap done", zap.String("kubeconfig", opts.KubeconfigPath), zap.String("certificate", store.CurrentPath()),
		zap.String("subject", cert.Leaf.Subject.String()), zap.Time("notAfter", cert.Leaf.NotAfter))
	return nil
}

// newFileStore is the client-go file store of the kubelet client pair in
// certDir; certFile and keyFile are where to look when it has no current pair.
func newFileStore(certDir, certFile, keyFile string, logger *zap.Logger) (certificate.FileStore, error) {
	store, err := certificate.NewFileStoreWithLogger(zapr.NewLogger(logger).V(1), pairPrefix, certDir, certDir, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certificate store in %s: %w", certDir, err)
	}
	return store, nil
}

// bootstrapKey returns the private key (PEM) to request the certificate for:
// the key of the store's current pair, else the pending key at pendingPath,
// else a new key, written to pendingPath first.
func bootstrapKey(store certificate.Store, pendingPath string) ([]byte, error) {
	if cur, err := store.Current(); err == nil && cur.PrivateKey != nil {
		if data, err := keyutil.MarshalPrivateKeyToPEM(cur.PrivateKey); err == nil {
			return data, nil
		}
	}
	data, err := os.ReadFile(pendingPath)
	switch {
	case err == nil:
		if _, perr := keyutil.ParsePrivateKeyPEM(data); perr == nil {
			return data, nil
		}
		// Corrupt (say, a crash while writing it): replace it below.
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("pending private key: %w", err)
	}
	if data, err = keyutil.MakeEllipticPrivateKeyPEM(); err != nil {
		return nil, fmt.Errorf("generating a private key: %w", err)
	}
	if err := keyutil.WriteKey(pendingPath, data); err != nil {
		return nil, fmt.Errorf("writing the pending private key: %w", err)
	}
	return data, nil
}

// nodeSubject is the subject of a kubelet client certificate.
func nodeSubject(nodeName string) pkix.Name {
	return pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}
}

// requestClientCertificate creates (or finds, after a restart) the request
// for keyPEM and returns the signed certificate (PEM).
func requestClientCertificate(ctx context.Context, client kubernetes.Interface, keyPEM []byte, nodeName string, logger *zap.Logger) ([]byte, error) {
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("private key for the certificate request: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("private key %T cannot sign", key)
	}
	subject := nodeSubject(nodeName)
	csrPEM, err := certutil.MakeCSR(key, &subject, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("making the certificate request: %w", err)
	}
	usages := certificate.DefaultKubeletClientGetUsages(key)
	name, err := csrName(signer.Public(), subject, usages)
	if err != nil {
		return nil, err
	}
	reqName, reqUID, err := createCSR(ctx, client, name, csrPEM, usages, key, logger)
	if err != nil {
		return nil, err
	}
	logger.Info("waiting for the client certificate to be approved and signed", zap.String("csr", reqName))
	waitCtx, cancel := context.WithTimeout(ctx, certificateWaitTimeout)
	defer cancel()
	certPEM, err := csr.WaitForCertificate(waitCtx, client, reqName, reqUID)
	if err != nil {
		if waitCtx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, waitCtx.Err())
		}
		return nil, fmt.Errorf("certificate signing request %s was not approved and signed: %w", reqName, err)
	}
	return certPEM, nil
}

// createCSR creates the request named name, or reuses it when it exists for
// the same key, retrying with backoff (1 s doubling to 30 s) while the error
// is transient, until ctx ends.
func createCSR(ctx context.Context, client kubernetes.Interface, name string, csrPEM []byte,
	usages []certificatesv1.KeyUsage, key any, logger *zap.Logger,
) (string, types.UID, error) {
	var reqName string
	var reqUID types.UID
	var lastErr error
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		var err error
		reqName, reqUID, err = csr.RequestCertificateWithContext(ctx, client, csrPEM, name,
			certificatesv1.KubeAPIServerClientKubeletSignerName, nil, usages, key)
		switch {
		case err == nil:
			return true, nil
		case !isTransient(err):
			return false, err
		}
		lastErr = err
		logger.Warn("cannot create the certificate signing request, retrying", zap.String("csr", name), zap.Error(err))
		return false, nil
	})
	switch {
	case err == nil:
		return reqName, reqUID, nil
	case lastErr != nil && ctx.Err() != nil:
		return "", "", fmt.Errorf("creating certificate signing request %s: %w (last error: %w)", name, ctx.Err(), lastErr)
	default:
		return "", "", fmt.Errorf("creating certificate signing request %s: %w", name, err)
	}
}

// isTransient says whether an error of the API server round trip may go away
// by itself (server unreachable, overloaded, timing out) rather than by a
// change of configuration (bad credentials, missing RBAC, invalid request).
func isTransient(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == 0 || code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	var netErr net.Error
	return errors.As(err, &netErr)
}

// csrName is a name that depends only on what the request asks for (public
// key, subject, usages), so that after a restart the same key finds the
// request it created before instead of creating another one.
func csrName(public crypto.PublicKey, subject pkix.Name, usages []certificatesv1.KeyUsage) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(public)
	if err != nil {
		return "", fmt.Errorf("certificate request name: %w", err)
	}
	h := sha256.New()
	count := func(n int) { _ = binary.Write(h, binary.BigEndian, uint32(n)) }
	field := func(b []byte) { count(len(b)); h.Write(b) } // length-prefixed: no two inputs hash the same stream
	field(der)
	field([]byte(subject.CommonName))
	count(len(subject.Organization))
	for _, o := range subject.Organization {
		field([]byte(o))
	}
	count(len(usages))
	for _, u := range usages {
		field([]byte(u))
	}
	return "node-csr-" + hex.EncodeToString(h.Sum(nil)), nil
}
