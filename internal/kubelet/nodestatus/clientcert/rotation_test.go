package clientcert

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/connrotation"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

func TestConnRotator(t *testing.T) {
	t.Parallel()
	a, b := &tls.Certificate{}, &tls.Certificate{}
	var cur *tls.Certificate = a
	closes := 0
	rot := &connRotator{current: func() *tls.Certificate { return cur }, closeAll: func() { closes++ }, logger: zap.NewNop(), last: a}
	steps := []struct {
		desc       string
		current    *tls.Certificate
		wantCheck  bool
		wantCloses int
	}{
		{desc: "unchanged", current: a, wantCloses: 0},
		{desc: "rotated", current: b, wantCheck: true, wantCloses: 1},
		{desc: "unchanged after rotation", current: b, wantCloses: 1},
		{desc: "expired", current: nil, wantCloses: 1},
		{desc: "still expired", current: nil, wantCloses: 1},
		{desc: "renewed after expiry", current: a, wantCheck: true, wantCloses: 2},
	}
	for _, s := range steps { // in order: each step builds on the previous one
		cur = s.current
		if got := rot.check(); got != s.wantCheck || closes != s.wantCloses {
			t.Errorf("%s: check = %v with %d closes, want %v with %d", s.desc, got, closes, s.wantCheck, s.wantCloses)
		}
	}
}

// peerServer is a TLS server on loopback that answers with the CN of the
// client certificate of the connection ("anonymous" without one).
func peerServer(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			fmt.Fprint(w, "anonymous")
			return
		}
		fmt.Fprint(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// whoSees returns what the peer server answers to a GET through cfg.
func whoSees(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

func TestRotatingConfigPresentsCurrentCertificate(t *testing.T) {
	t.Parallel()
	srv, serverCA := peerServer(t)
	ca := testca.New(t, "test-ca")
	pair := func(cn string) *tls.Certificate {
		c, k := ca.IssueClient(t, cn, nil, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
		p, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return &p
	}
	a, b := pair("a"), pair("b")
	staticCert, staticKey := ca.IssueClient(t, "static", nil, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	base := &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: serverCA, CertData: staticCert, KeyData: staticKey}}

	var cur atomic.Pointer[tls.Certificate]
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 5 * time.Second}).DialContext)
	cfg, err := rotatingConfig(base, cur.Load, dialer.DialContext)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSClientConfig.CAData != nil || cfg.CertData != nil || cfg.KeyData != nil || cfg.Transport == nil {
		t.Fatalf("rotating config keeps TLS options or lacks a transport: %+v", cfg.TLSClientConfig)
	}
	rot := &connRotator{current: cur.Load, closeAll: dialer.CloseAll, logger: zaptest.NewLogger(t)}
	steps := []struct {
		desc    string
		current *tls.Certificate
		check   bool // run the rotator's check before the request
		want    string
	}{
		{desc: "no certificate yet", want: "anonymous"},
		{desc: "first certificate, connection not yet closed", current: a, want: "anonymous"},
		{desc: "first certificate after the check", current: a, check: true, want: "a"},
		{desc: "rotated, connection not yet closed", current: b, want: "a"},
		{desc: "rotated after the check", current: b, check: true, want: "b"},
	}
	for _, s := range steps { // in order: the connection carries over
		cur.Store(s.current)
		if s.check {
			rot.check()
		}
		if got := whoSees(t, cfg); got != s.want {
			t.Errorf("%s: server sees %q, want %q", s.desc, got, s.want)
		}
	}
}

func TestNewClientConfig(t *testing.T) {
	t.Parallel()
	srv, serverCA := peerServer(t)
	ca := testca.New(t, "test-ca")
	now := time.Now()
	tests := []struct {
		desc          string
		kubeconfig    func(t *testing.T, dir string) clientcmdapi.Config // nil = no file
		noRotation    bool
		nodeName      string
		wantErr       string
		wantRotating  bool   // the config has the rotating transport
		wantServerSee string // what the server sees through the config
	}{
		{desc: "kubeconfig missing", nodeName: "n1", wantErr: "kubelet.conf"},
		{
			desc:       "rotation off",
			kubeconfig: fileCertKubeconfig(ca, srv.URL, serverCA, "system:node:n1", now.Add(-time.Hour), now.Add(24*time.Hour)),
			noRotation: true, nodeName: "n1", wantServerSee: "system:node:n1",
		},
		{
			desc: "token kubeconfig",
			kubeconfig: func(*testing.T, string) clientcmdapi.Config {
				cfg := certKubeconfig(srv.URL, serverCA, "", "")
				cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "abc.def"}
				return cfg
			},
			nodeName: "n1", wantServerSee: "anonymous",
		},
		{
			desc:       "rotation without node name",
			kubeconfig: fileCertKubeconfig(ca, srv.URL, serverCA, "system:node:n1", now.Add(-time.Hour), now.Add(24*time.Hour)),
			wantErr:    "no node name",
		},
		{
			desc:       "rotation, certificate far from expiry",
			kubeconfig: fileCertKubeconfig(ca, srv.URL, serverCA, "system:node:n1", now.Add(-time.Hour), now.Add(24*time.Hour)),
			nodeName:   "n1", wantRotating: true, wantServerSee: "system:node:n1",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := Options{
				KubeconfigPath: filepath.Join(dir, "kubelet.conf"), CertDir: filepath.Join(dir, "pki"),
				NodeName: tc.nodeName, RotateCertificates: !tc.noRotation, Logger: zaptest.NewLogger(t),
			}
			if tc.kubeconfig != nil {
				if err := clientcmd.WriteToFile(tc.kubeconfig(t, dir), opts.KubeconfigPath); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cfg, err := NewClientConfig(ctx, opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewClientConfig = %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rotating := cfg.Transport != nil; rotating != tc.wantRotating {
				t.Errorf("rotating transport = %v, want %v", rotating, tc.wantRotating)
			}
			if got := whoSees(t, cfg); got != tc.wantServerSee {
				t.Errorf("server sees %q, want %q", got, tc.wantServerSee)
			}
		})
	}
}

// fileCertKubeconfig returns a kubeconfig setup with a certificate for cn in
// files of the test's directory.
func fileCertKubeconfig(ca *testca.CA, server string, serverCA []byte, cn string, notBefore, notAfter time.Time) func(t *testing.T, dir string) clientcmdapi.Config {
	return func(t *testing.T, dir string) clientcmdapi.Config {
		c, k := ca.IssueClient(t, cn, []string{"system:nodes"}, notBefore, notAfter)
		return certKubeconfig(server, serverCA, writeFile(t, dir, "client.crt", c), writeFile(t, dir, "client.key", k))
	}
}
