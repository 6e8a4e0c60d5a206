package testca

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestIssue(t *testing.T) {
	t.Parallel()
	ca := New(t, "test-ca")
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	now := time.Now()
	for _, tc := range []struct {
		desc      string
		cert      Cert
		usage     x509.ExtKeyUsage
		notBefore time.Time // zero: about an hour ago
		notAfter  time.Time // zero: about a day from now
	}{
		{desc: "client defaults", cert: Cert{CommonName: "system:node:n1", Organizations: []string{"system:nodes"}},
			usage: x509.ExtKeyUsageClientAuth},
		{desc: "serving certificate", cert: Cert{CommonName: "n1", DNSNames: []string{"n1"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
			Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, usage: x509.ExtKeyUsageServerAuth},
		{desc: "explicit validity", cert: Cert{CommonName: "short", NotBefore: now.Add(-time.Minute), NotAfter: now.Add(20 * time.Second)},
			usage: x509.ExtKeyUsageClientAuth, notBefore: now.Add(-time.Minute), notAfter: now.Add(20 * time.Second)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			certPEM, keyPEM := ca.Issue(t, tc.cert)
			if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
				t.Fatalf("certificate and key do not match: %v", err)
			}
			leaf := ParseCert(t, certPEM)
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Errorf("does not verify for %v against the CA: %v", tc.usage, err)
			}
			if leaf.Subject.CommonName != tc.cert.CommonName || !slices.Equal(leaf.Subject.Organization, tc.cert.Organizations) ||
				!slices.Equal(leaf.DNSNames, tc.cert.DNSNames) || len(leaf.IPAddresses) != len(tc.cert.IPs) {
				t.Errorf("subject %s, DNS %v, IPs %v; want %+v", leaf.Subject, leaf.DNSNames, leaf.IPAddresses, tc.cert)
			}
			wantBefore, wantAfter := tc.notBefore, tc.notAfter
			if wantBefore.IsZero() {
				wantBefore, wantAfter = now.Add(-time.Hour), now.Add(24*time.Hour)
			}
			if d := leaf.NotBefore.Sub(wantBefore); d < -time.Minute || d > time.Minute {
				t.Errorf("NotBefore = %v, want about %v", leaf.NotBefore, wantBefore)
			}
			if d := leaf.NotAfter.Sub(wantAfter); d < -time.Minute || d > time.Minute {
				t.Errorf("NotAfter = %v, want about %v", leaf.NotAfter, wantAfter)
			}
		})
	}
}

func TestLoadAndIssueFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	orig := New(t, "cluster-ca")
	keyDER, err := x509.MarshalECPrivateKey(orig.Key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	caFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	for path, data := range map[string][]byte{caFile: orig.CertPEM, keyFile: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ca := Load(t, caFile, keyFile)
	if !ca.Cert.Equal(orig.Cert) {
		t.Fatal("Load returned another certificate")
	}
	certFile, leafKeyFile := ca.IssueFiles(t, dir, "client", Cert{CommonName: "c"})
	pair, err := tls.LoadX509KeyPair(certFile, leafKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := pair.Leaf.CheckSignatureFrom(orig.Cert); err != nil {
		t.Errorf("issued certificate not signed by the loaded CA: %v", err)
	}
	if st, err := os.Stat(leafKeyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v, %v", st.Mode(), err)
	}
}
