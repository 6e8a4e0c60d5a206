package auth

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// serve runs an HTTPS server with cfg on a loopback port until the test ends
// and returns its address.
func serve(t *testing.T, cfg *tls.Config, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// servedCert makes a TLS handshake with addr and returns the server's leaf.
func servedCert(t *testing.T, addr string, client *tls.Config) (*x509.Certificate, error) {
	t.Helper()
	if client == nil {
		client = &tls.Config{}
	}
	client = client.Clone()
	client.InsecureSkipVerify = true // the tests look at the certificate themselves
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, client)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

func TestSelfSignedCreatedOnceAndReused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := filepath.Join(t.TempDir(), "pki")
	opts := ServingOptions{CertDir: dir, NodeName: "node-a", Hostnames: []string{"node-a.example"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Logger: zaptest.NewLogger(t)}
	cfg, err := ServingTLSConfig(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, SelfSignedCertFile), filepath.Join(dir, SelfSignedKeyFile)
	first, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(keyFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, mode %v", err, st.Mode())
	}
	leaf, err := servedCert(t, serve(t, cfg, http.NotFoundHandler()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(leaf.Raw, testca.ParseCert(t, first).Raw) {
		t.Error("the served certificate is not kubelet.crt")
	}
	if !slices.Contains(leaf.DNSNames, "node-a.example") || len(leaf.IPAddresses) == 0 || !leaf.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("SANs %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: rootsOf(t, first), DNSName: "node-a.example"}); err != nil {
		t.Errorf("self-signed chain does not verify: %v", err)
	}

	// A second start (a kubelet restart) reuses the pair.
	if _, err := ServingTLSConfig(ctx, opts); err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("the self-signed certificate was created again")
	}
}

// rootsOf is a pool of every certificate in data.
func rootsOf(t *testing.T, data []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		t.Fatal("no certificates")
	}
	return pool
}

func TestFileCertificateServedAndReloaded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	ca := testca.New(t, "serving-ca")
	spec := testca.Cert{CommonName: "node-a", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	certFile, keyFile := ca.IssueFiles(t, dir, "serving", spec)
	cfg, err := ServingTLSConfig(ctx, ServingOptions{CertFile: certFile, KeyFile: keyFile, CertDir: dir, NodeName: "node-a",
		Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, SelfSignedCertFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a self-signed pair was made next to the given files: %v", err)
	}
	addr := serve(t, cfg, http.NotFoundHandler())
	certPEM, _ := os.ReadFile(certFile)
	leaf, err := servedCert(t, addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(leaf.Raw, testca.ParseCert(t, certPEM).Raw) {
		t.Fatal("the served certificate is not the --tls-cert-file one")
	}

	// Replace the pair (key first, as an operator's tool might): the new one is served.
	spec.CommonName = "node-a-renewed"
	newCert, newKey := ca.Issue(t, spec)
	writeFile(t, keyFile, newKey)
	writeFile(t, certFile, newCert)
	deadline := time.Now().Add(20 * time.Second)
	for {
		leaf, err := servedCert(t, addr, nil)
		if err == nil && leaf.Subject.CommonName == "node-a-renewed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate is not served (last %v, %v)", leaf, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestTLSVersions(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	base := ServingOptions{CertDir: dir, NodeName: "node-a", IPs: []net.IP{net.ParseIP("127.0.0.1")}, Logger: zaptest.NewLogger(t)}

	cfg, err := ServingTLSConfig(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.RequestClientCert {
		t.Errorf("MinVersion %x ClientAuth %v", cfg.MinVersion, cfg.ClientAuth)
	}
	addr := serve(t, cfg, http.NotFoundHandler())
	if _, err := servedCert(t, addr, &tls.Config{MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("a TLS 1.1 handshake succeeded")
	}
	if _, err := servedCert(t, addr, &tls.Config{MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12}); err != nil {
		t.Errorf("TLS 1.2 handshake: %v", err)
	}

	tls13 := base
	tls13.TLSMinVersion = tls.VersionTLS13
	cfg13, err := ServingTLSConfig(ctx, tls13)
	if err != nil {
		t.Fatal(err)
	}
	addr13 := serve(t, cfg13, http.NotFoundHandler())
	if _, err := servedCert(t, addr13, &tls.Config{MaxVersion: tls.VersionTLS12}); err == nil {
		t.Error("a TLS 1.2 handshake succeeded with minimum TLS 1.3")
	}

	tls10 := base
	tls10.TLSMinVersion = tls.VersionTLS10
	if _, err := ServingTLSConfig(ctx, tls10); err == nil || !strings.Contains(err.Error(), "TLS 1.2 or newer") {
		t.Errorf("TLS 1.0 minimum accepted: %v", err)
	}
}

func TestServingOptionErrors(t *testing.T) {
	t.Parallel()
	ip := []net.IP{net.ParseIP("127.0.0.1")}
	client := fake.NewClientset()
	for _, tc := range []struct {
		desc    string
		opts    ServingOptions
		wantErr string
	}{
		{desc: "cert without key", opts: ServingOptions{CertFile: "/x.crt", CertDir: "/tmp"}, wantErr: "go together"},
		{desc: "missing files", opts: ServingOptions{CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key"}, wantErr: "/nonexistent.crt"},
		{desc: "no cert dir for self-signed", opts: ServingOptions{NodeName: "n"}, wantErr: "no --cert-dir"},
		{desc: "bootstrap without client", opts: ServingOptions{ServerTLSBootstrap: true, NodeName: "n", CertDir: "/tmp", IPs: ip}, wantErr: "API client"},
		{desc: "bootstrap without node name", opts: ServingOptions{ServerTLSBootstrap: true, Client: client, CertDir: "/tmp", IPs: ip}, wantErr: "node name"},
		{desc: "bootstrap without cert dir", opts: ServingOptions{ServerTLSBootstrap: true, Client: client, NodeName: "n", IPs: ip}, wantErr: "--cert-dir"},
		{desc: "bootstrap without IPs", opts: ServingOptions{ServerTLSBootstrap: true, Client: client, NodeName: "n", CertDir: "/tmp",
			Hostnames: []string{"n"}}, wantErr: "at least one IP"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			tc.opts.Logger = zaptest.NewLogger(t)
			_, err := ServingTLSConfig(context.Background(), tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestServingTemplate(t *testing.T) {
	t.Parallel()
	ip := func(s string) net.IP { return net.ParseIP(s) }
	for _, tc := range []struct {
		desc      string
		opts      ServingOptions
		wantNil   bool
		wantDNS   []string
		wantIPs   []string
		wantCN    string
		wantOrgs  []string
		wantCalls int
	}{
		{desc: "static addresses, sorted and unique", opts: ServingOptions{NodeName: "n", Hostnames: []string{"b", "a", "b", ""},
			IPs: []net.IP{ip("10.0.0.2"), ip("10.0.0.1"), ip("10.0.0.2")}},
			wantDNS: []string{"a", "b"}, wantIPs: []string{"10.0.0.1", "10.0.0.2"}, wantCN: "system:node:n", wantOrgs: []string{"system:nodes"}},
		{desc: "no IP: no request", opts: ServingOptions{NodeName: "n", Hostnames: []string{"a"}}, wantNil: true},
		{desc: "dynamic addresses win", opts: ServingOptions{NodeName: "n", IPs: []net.IP{ip("10.0.0.9")},
			Addresses: func() ([]string, []net.IP) { return []string{"dyn"}, []net.IP{ip("127.0.0.1")} }},
			wantDNS: []string{"dyn"}, wantIPs: []string{"127.0.0.1"}, wantCN: "system:node:n", wantOrgs: []string{"system:nodes"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			tmpl := servingTemplate(tc.opts)()
			if tc.wantNil {
				if tmpl != nil {
					t.Fatalf("template %+v, want none", tmpl)
				}
				return
			}
			var ips []string
			for _, i := range tmpl.IPAddresses {
				ips = append(ips, i.String())
			}
			if tmpl.Subject.CommonName != tc.wantCN || !slices.Equal(tmpl.Subject.Organization, tc.wantOrgs) ||
				!slices.Equal(tmpl.DNSNames, tc.wantDNS) || !slices.Equal(ips, tc.wantIPs) {
				t.Errorf("template subject %v DNS %v IPs %v", tmpl.Subject, tmpl.DNSNames, ips)
			}
		})
	}
}

// TestBootstrapSeededFromFiles: with serverTLSBootstrap the given files seed
// the certificate store, and that pair is served before any request is signed.
func TestBootstrapSeededFromFiles(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	ca := testca.New(t, "cluster-ca")
	certFile, keyFile := ca.IssueFiles(t, dir, "seed", testca.Cert{CommonName: "system:node:node-a", Organizations: []string{"system:nodes"},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	cfg, err := ServingTLSConfig(ctx, ServingOptions{CertFile: certFile, KeyFile: keyFile, CertDir: dir, NodeName: "node-a",
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, ServerTLSBootstrap: true, Client: fake.NewClientset(), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := servedCert(t, serve(t, cfg, http.NotFoundHandler()), nil)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, _ := os.ReadFile(certFile)
	if !bytes.Equal(leaf.Raw, testca.ParseCert(t, certPEM).Raw) {
		t.Errorf("served %s, want the seed pair", leaf.Subject)
	}
}

// TestBootstrapWithoutCertificate: until a request is signed the handshake fails.
func TestBootstrapWithoutCertificate(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg, err := ServingTLSConfig(ctx, ServingOptions{CertDir: t.TempDir(), NodeName: "node-a",
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, ServerTLSBootstrap: true, Client: fake.NewClientset(), Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.GetCertificate(&tls.ClientHelloInfo{}); err == nil || !strings.Contains(err.Error(), "no serving certificate available") {
		t.Errorf("GetCertificate error %v", err)
	}
	if _, err := servedCert(t, serve(t, cfg, http.NotFoundHandler()), nil); err == nil {
		t.Error("handshake succeeded without a serving certificate")
	}
}
