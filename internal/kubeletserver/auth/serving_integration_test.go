//go:build linux

package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// TestIntegrationServerTLSBootstrap: the serving certificate is requested
// from the kubelet-serving signer with the node's credentials, approved by an
// admin, signed by the controller-manager, then served and trusted by the
// cluster CA.
func TestIntegrationServerTLSBootstrap(t *testing.T) {
	c := shared.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	name := randomName("serving-")
	certDir := t.TempDir()
	client := c.NodeClient(t, name)
	a, err := New(Options{Client: client, NodeName: name, ClientCAFile: c.CAFile, WebhookAuthnEnabled: true,
		AuthorizationMode: ModeWebhook, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	go a.Run(ctx)
	cfg, err := ServingTLSConfig(ctx, ServingOptions{CertDir: certDir, NodeName: name, Hostnames: []string{name},
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, ServerTLSBootstrap: true, Client: client, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, cfg, a.Filter(whoAmIHandler()))
	if _, err := servedCert(t, addr, nil); err == nil {
		t.Fatal("handshake succeeded before the serving certificate was signed")
	}

	req := waitForServingCSR(t, c, name)
	t.Cleanup(func() {
		_ = c.Client.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), req.Name, metav1.DeleteOptions{})
	})
	checkServingCSR(t, req, name)
	req.Status.Conditions = append(req.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "TestApproval", Message: "approved by the test"})
	if _, err := c.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, req.Name, req, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("approving %s: %v", req.Name, err)
	}

	// Once signed, a client trusting only the cluster CA accepts the server
	// (chain and IP SAN verified), and the apiserver's client certificate passes.
	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(c.CAFile)
	if err != nil || !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("cluster CA: %v", err)
	}
	verifying := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{apiserverClientCert(t, c)}}
	deadline := time.Now().Add(60 * time.Second)
	for {
		d := &net.Dialer{Timeout: 5 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", addr, verifying)
		if err == nil {
			leaf := conn.ConnectionState().PeerCertificates[0]
			_ = conn.Close()
			if leaf.Subject.CommonName != "system:node:"+name || !slices.Contains(leaf.DNSNames, name) {
				t.Errorf("served certificate %s DNS %v", leaf.Subject, leaf.DNSNames)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate signed by the cluster CA served: %v\n%s", err, c.LogTail("kube-controller-manager", 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	caller{addr: addr, tls: verifying}.expect(t, "GET", "/pods", "", http.StatusOK, "ok kube-apiserver-kubelet-client")
	if _, err := os.Stat(filepath.Join(certDir, ServingPairPrefix+"-current.pem")); err != nil {
		t.Errorf("the signed pair is not in the certificate directory: %v", err)
	}
}

// waitForServingCSR waits for the kubelet-serving request of node name.
func waitForServingCSR(t *testing.T, c *controlplane.Cluster, name string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		list, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			r := &list.Items[i]
			if r.Spec.SignerName == certificatesv1.KubeletServingSignerName && r.Spec.Username == "system:node:"+name {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no kubelet-serving CSR from system:node:%s", name)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkServingCSR checks the request's subject, SANs and usages.
func checkServingCSR(t *testing.T, r *certificatesv1.CertificateSigningRequest, name string) {
	t.Helper()
	block, _ := pem.Decode(r.Spec.Request)
	if block == nil {
		t.Fatal("CSR without PEM")
	}
	cr, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if cr.Subject.CommonName != "system:node:"+name || !slices.Equal(cr.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("CSR subject %s", cr.Subject)
	}
	if !slices.Equal(cr.DNSNames, []string{name}) || len(cr.IPAddresses) != 1 || !cr.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("CSR SANs %v %v", cr.DNSNames, cr.IPAddresses)
	}
	if !slices.Contains(r.Spec.Usages, certificatesv1.UsageServerAuth) || slices.Contains(r.Spec.Usages, certificatesv1.UsageClientAuth) {
		t.Errorf("CSR usages %v", r.Spec.Usages)
	}
}
