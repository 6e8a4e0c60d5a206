package clientcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// testCA signs client certificates in tests.
type testCA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
}

// newTestCA makes a self-signed CA valid for a day.
func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// loadTestCA reads a CA certificate and key (PEM files, as the control plane's).
func loadTestCA(t *testing.T, certFile, keyFile string) *testCA {
	t.Helper()
	certs, err := certutil.CertsFromFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := keyutil.PrivateKeyFromFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		t.Fatalf("CA key %T is not a signer", key)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: certs[0], key: signer, certPEM: certPEM}
}

// issue signs a new client certificate (ECDSA key) for cn/orgs valid from
// notBefore to notAfter and returns certificate and key PEM.
func (ca *testCA) issue(t *testing.T, cn string, orgs []string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM
}

// writeFile writes data to dir/name and returns the path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// certKubeconfig is a kubeconfig for server whose client certificate and key
// are the files certFile and keyFile.
func certKubeconfig(server string, caPEM []byte, certFile, keyFile string) clientcmdapi.Config {
	return clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"c": {Server: server, CertificateAuthorityData: caPEM}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"u": {ClientCertificate: certFile, ClientKey: keyFile}},
		Contexts:       map[string]*clientcmdapi.Context{"x": {Cluster: "c", AuthInfo: "u"}},
		CurrentContext: "x",
	}
}

// readLeaf parses the first certificate of a PEM file.
func readLeaf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	certs, err := certutil.CertsFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}
