// Package testca is a certificate authority for tests: a fresh self-signed
// one, or the CA of a real control plane loaded from its files, issuing
// ECDSA client and serving certificates. It is test support: only _test.go
// files (and other internal/testutil packages) may import it. Every helper
// fails the test on error.
package testca

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// CA signs certificates.
type CA struct {
	// Cert is the CA certificate.
	Cert *x509.Certificate
	// Key is the CA's private key.
	Key crypto.Signer
	// CertPEM is Cert, PEM encoded (for kubeconfigs and CA files).
	CertPEM []byte
}

// New makes a self-signed CA named cn, valid from an hour ago for a day.
func New(t testing.TB, cn string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testca: CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatalf("testca: CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testca: CA certificate: %v", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Load reads a CA certificate and key from PEM files (PKCS#1, PKCS#8 or EC
// keys), such as a control plane's pki/ca.crt and pki/ca.key.
func Load(t testing.TB, certFile, keyFile string) *CA {
	t.Helper()
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatalf("testca: %v", err)
	}
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		t.Fatalf("testca: CA certificate %s: %v", certFile, err)
	}
	key, err := keyutil.PrivateKeyFromFile(keyFile)
	if err != nil {
		t.Fatalf("testca: CA key: %v", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		t.Fatalf("testca: CA key %s (%T) cannot sign", keyFile, key)
	}
	return &CA{Cert: certs[0], Key: signer, CertPEM: certPEM}
}

// Cert describes a certificate to issue.
type Cert struct {
	CommonName    string
	Organizations []string
	DNSNames      []string
	IPs           []net.IP
	// Usage is the extended key usage; nil means client auth.
	Usage []x509.ExtKeyUsage
	// NotBefore is when the certificate becomes valid; zero means an hour ago.
	NotBefore time.Time
	// NotAfter is when it expires; zero means a day from now.
	NotAfter time.Time
}

// Issue signs a certificate for a new ECDSA P-256 key and returns the
// certificate and the key ("EC PRIVATE KEY"), PEM encoded.
func (ca *CA) Issue(t testing.TB, c Cert) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testca: key: %v", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatalf("testca: key: %v", err)
	}
	return ca.IssueFor(t, key.Public(), c), pem.EncodeToMemory(&pem.Block{Type: keyutil.ECPrivateKeyBlockType, Bytes: keyDER})
}

// IssueFor signs a certificate for the public key pub (a signer answering a
// request) and returns it PEM encoded.
func (ca *CA) IssueFor(t testing.TB, pub crypto.PublicKey, c Cert) []byte {
	t.Helper()
	if c.Usage == nil {
		c.Usage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	if c.NotBefore.IsZero() {
		c.NotBefore = time.Now().Add(-time.Hour)
	}
	if c.NotAfter.IsZero() {
		c.NotAfter = time.Now().Add(24 * time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: c.CommonName, Organization: c.Organizations},
		DNSNames:     c.DNSNames,
		IPAddresses:  c.IPs,
		NotBefore:    c.NotBefore,
		NotAfter:     c.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  c.Usage,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, pub, ca.Key)
	if err != nil {
		t.Fatalf("testca: certificate for %q: %v", c.CommonName, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// IssueClient is Issue for a client certificate of cn in the groups orgs,
// valid from notBefore to notAfter.
func (ca *CA) IssueClient(t testing.TB, cn string, orgs []string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.Issue(t, Cert{CommonName: cn, Organizations: orgs, NotBefore: notBefore, NotAfter: notAfter})
}

// IssueFiles issues a certificate into dir/name.crt and dir/name.key (mode
// 0600) and returns their paths.
func (ca *CA) IssueFiles(t testing.TB, dir, name string, c Cert) (certFile, keyFile string) {
	t.Helper()
	certPEM, keyPEM := ca.Issue(t, c)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	for path, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatalf("testca: %v", err)
		}
	}
	return certFile, keyFile
}

// ParseCert parses the first certificate of PEM data.
func ParseCert(t testing.TB, data []byte) *x509.Certificate {
	t.Helper()
	certs, err := certutil.ParseCertsPEM(data)
	if err != nil {
		t.Fatalf("testca: %v", err)
	}
	return certs[0]
}

// serial is a random positive serial number.
func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("testca: serial: %v", err)
	}
	return n.Add(n, big.NewInt(1))
}
