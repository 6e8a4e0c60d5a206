package clientcert

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
)

// kubeconfigState is what Bootstrap finds at --kubeconfig.
type kubeconfigState int

const (
	// kubeconfigMissing: there is no file.
	kubeconfigMissing kubeconfigState = iota
	// kubeconfigBroken: the file, or the certificate and key it names, cannot
	// be read or parsed, or they do not match.
	kubeconfigBroken
	// kubeconfigNoCert: a valid kubeconfig that authenticates without a
	// client certificate (token, exec plugin, ...).
	kubeconfigNoCert
	// kubeconfigExpired: a certificate of the client chain has expired.
	kubeconfigExpired
	// kubeconfigValid: a parsable client certificate and key, unexpired.
	kubeconfigValid
)

func (s kubeconfigState) String() string {
	switch s {
	case kubeconfigMissing:
		return "missing"
	case kubeconfigBroken:
		return "broken"
	case kubeconfigNoCert:
		return "no client certificate"
	case kubeconfigExpired:
		return "expired"
	case kubeconfigValid:
		return "valid"
	}
	return fmt.Sprintf("kubeconfigState(%d)", int(s))
}

// loadRESTConfig reads a kubeconfig file (its current context; relative paths
// resolved against the file's directory) into a rest.Config.
func loadRESTConfig(path string) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: path}
	loaded, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", path, err)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*loaded, loaded.CurrentContext, &clientcmd.ConfigOverrides{}, rules).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// checkKubeconfig says whether the kubeconfig at path holds a usable client
// certificate at now. For every state but kubeconfigValid the error says why
// (for kubeconfigMissing it is the fs.ErrNotExist of the stat).
func checkKubeconfig(path string, now time.Time) (kubeconfigState, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return kubeconfigMissing, err
		}
		return kubeconfigBroken, err
	}
	cfg, err := loadRESTConfig(path)
	if err != nil {
		return kubeconfigBroken, err
	}
	certPEM, keyPEM, err := clientCertPEM(cfg)
	if err != nil {
		return kubeconfigBroken, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if certPEM == nil {
		return kubeconfigNoCert, fmt.Errorf("kubeconfig %s has no client certificate", path)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return kubeconfigBroken, fmt.Errorf("kubeconfig %s: client certificate and key: %w", path, err)
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return kubeconfigBroken, fmt.Errorf("kubeconfig %s: client certificate: %w", path, err)
	}
	for _, c := range certs {
		if now.After(c.NotAfter) {
			return kubeconfigExpired, fmt.Errorf("kubeconfig %s: client certificate %q expired at %s",
				path, c.Subject.CommonName, c.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	return kubeconfigValid, nil
}

// clientCertPEM returns the client certificate and key of cfg, read from their
// files when the kubeconfig names files; nil, nil, nil without a certificate.
func clientCertPEM(cfg *rest.Config) (certPEM, keyPEM []byte, err error) {
	certPEM, keyPEM = cfg.CertData, cfg.KeyData
	if len(certPEM) == 0 && cfg.CertFile == "" {
		return nil, nil, nil
	}
	if len(certPEM) == 0 {
		if certPEM, err = os.ReadFile(cfg.CertFile); err != nil {
			return nil, nil, fmt.Errorf("reading client certificate: %w", err)
		}
	}
	if len(keyPEM) == 0 {
		if cfg.KeyFile == "" {
			return nil, nil, errors.New("client certificate without a client key")
		}
		if keyPEM, err = os.ReadFile(cfg.KeyFile); err != nil {
			return nil, nil, fmt.Errorf("reading client key: %w", err)
		}
	}
	return certPEM, keyPEM, nil
}

// nodeKubeconfig is the kubeconfig Bootstrap writes: the cluster of the
// bootstrap kubeconfig (server, CA file or else CA data, TLS server name) and
// the client certificate and key both at pemPath (the store's current pair).
func nodeKubeconfig(bootstrap *rest.Config, pemPath string) clientcmdapi.Config {
	cluster := &clientcmdapi.Cluster{
		Server:                bootstrap.Host,
		TLSServerName:         bootstrap.ServerName,
		InsecureSkipTLSVerify: bootstrap.Insecure,
		CertificateAuthority:  bootstrap.CAFile,
	}
	if bootstrap.CAFile == "" {
		cluster.CertificateAuthorityData = bootstrap.CAData
	}
	return clientcmdapi.Config{
		Clusters:  map[string]*clientcmdapi.Cluster{"default-cluster": cluster},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"default-auth": {ClientCertificate: pemPath, ClientKey: pemPath}},
		Contexts: map[string]*clientcmdapi.Context{"default-context": {
			Cluster: "default-cluster", AuthInfo: "default-auth", Namespace: "default",
		}},
		CurrentContext: "default-context",
	}
}

// writeKubeconfig writes cfg to path atomically (a temporary file in the same
// directory renamed over it), mode 0600 even when path existed with another.
func writeKubeconfig(path string, cfg clientcmdapi.Config) (retErr error) {
	data, err := clientcmd.Write(cfg)
	if err != nil {
		return fmt.Errorf("encoding kubeconfig: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	defer func() {
		if retErr != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}
