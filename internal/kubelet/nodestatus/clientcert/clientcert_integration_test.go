//go:build linux

package clientcert

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"
	"k8s.io/client-go/util/keyutil"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// newNode returns Options for a fresh node (unique name, own directory, the
// cluster's bootstrap kubeconfig) and deletes its Node and CSRs at the end.
func newNode(t *testing.T, c *controlplane.Cluster) Options {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := "cc-" + hex.EncodeToString(b)
	dir := t.TempDir()
	t.Cleanup(func() {
		c.DeleteNode(t, name)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, r := range nodeCSRs(t, c, name) {
			_ = c.Client.CertificatesV1().CertificateSigningRequests().Delete(ctx, r.Name, metav1.DeleteOptions{})
		}
	})
	return Options{
		KubeconfigPath:          filepath.Join(dir, "kubelet.conf"),
		BootstrapKubeconfigPath: c.BootstrapKubeconfig,
		CertDir:                 filepath.Join(dir, "pki"),
		NodeName:                name,
		Logger:                  zaptest.NewLogger(t),
	}
}

// nodeCSRs lists the requests for system:node:<name>.
func nodeCSRs(t *testing.T, c *controlplane.Cluster, name string) []certificatesv1.CertificateSigningRequest {
	t.Helper()
	list, err := c.Client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Errorf("listing CSRs: %v", err)
		return nil
	}
	var out []certificatesv1.CertificateSigningRequest
	for _, r := range list.Items {
		block, _ := pem.Decode(r.Spec.Request)
		if block == nil {
			continue
		}
		if req, err := x509.ParseCertificateRequest(block.Bytes); err == nil && req.Subject.CommonName == "system:node:"+name {
			out = append(out, r)
		}
	}
	return out
}

// whoAmI returns the user the API server sees behind client.
func whoAmI(ctx context.Context, t *testing.T, client kubernetes.Interface) authenticationv1.UserInfo {
	t.Helper()
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview: %v", err)
	}
	return r.Status.UserInfo
}

// checkNodeCert checks that path holds a certificate for system:node:<name>
// in system:nodes for client auth, signed by the cluster CA.
func checkNodeCert(t *testing.T, c *controlplane.Cluster, path, name string) *x509.Certificate {
	t.Helper()
	leaf := readLeaf(t, path)
	if leaf.Subject.CommonName != "system:node:"+name || !slices.Equal(leaf.Subject.Organization, []string{"system:nodes"}) {
		t.Errorf("subject = %s, want CN=system:node:%s, O=system:nodes", leaf.Subject, name)
	}
	roots, err := certutil.NewPool(c.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("certificate does not verify against %s for client auth: %v", c.CAFile, err)
	}
	return leaf
}

func TestIntegrationBootstrap(t *testing.T) {
	c := shared.Get(t)
	opts := newNode(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := Bootstrap(ctx, opts); err != nil {
		t.Fatalf("Bootstrap: %v\n%s", err, c.LogTail("kube-controller-manager", 20))
	}

	// The kubeconfig: mode 0600, credentials in the store's current pair.
	current := filepath.Join(opts.CertDir, "kubelet-client-current.pem")
	if st, err := os.Stat(opts.KubeconfigPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig: %v (mode %v), want mode 0600", err, st.Mode().Perm())
	}
	kc, err := clientcmd.LoadFromFile(opts.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	auth := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
	if auth.ClientCertificate != current || auth.ClientKey != current {
		t.Errorf("kubeconfig client certificate/key = %s/%s, want %s", auth.ClientCertificate, auth.ClientKey, current)
	}
	target, err := os.Readlink(current)
	if err != nil || !regexp.MustCompile(`kubelet-client-\d{4}(-\d\d){5}\.pem$`).MatchString(target) {
		t.Errorf("%s -> %q (%v), want a link to kubelet-client-<timestamp>.pem", current, target, err)
	}
	if _, err := os.Stat(filepath.Join(opts.CertDir, pendingKeyFile)); !os.IsNotExist(err) {
		t.Errorf("pending key still there after bootstrap (%v)", err)
	}
	checkNodeCert(t, c, current, opts.NodeName)

	// The request: named after its content, by the bootstrap token, approved.
	csrs := nodeCSRs(t, c, opts.NodeName)
	if len(csrs) != 1 {
		t.Fatalf("%d CSRs for the node, want 1", len(csrs))
	}
	r := csrs[0]
	if !strings.HasPrefix(r.Name, "node-csr-") || r.Spec.SignerName != certificatesv1.KubeAPIServerClientKubeletSignerName ||
		!strings.HasPrefix(r.Spec.Username, "system:bootstrap:") || len(r.Status.Certificate) == 0 {
		t.Errorf("CSR %s: signer %s, user %s, issued %v", r.Name, r.Spec.SignerName, r.Spec.Username, len(r.Status.Certificate) > 0)
	}

	// The node client works: it is the node and may create its Node.
	client := newNodeClient(ctx, t, opts)
	if _, err := client.Discovery().RESTClient().Get().AbsPath("/api").DoRaw(ctx); err != nil {
		t.Errorf("GET /api: %v", err)
	}
	if u := whoAmI(ctx, t, client); u.Username != "system:node:"+opts.NodeName || !slices.Contains(u.Groups, "system:nodes") {
		t.Errorf("API server sees %+v, want system:node:%s in system:nodes", u, opts.NodeName)
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: opts.NodeName}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating its Node: %v", err)
	}

	// A second Bootstrap changes nothing.
	kubeconfigBefore, _ := os.ReadFile(opts.KubeconfigPath)
	if err := Bootstrap(ctx, opts); err != nil {
		t.Fatalf("second Bootstrap: %v", err)
	}
	kubeconfigAfter, _ := os.ReadFile(opts.KubeconfigPath)
	targetAfter, _ := os.Readlink(current)
	if string(kubeconfigAfter) != string(kubeconfigBefore) || targetAfter != target || len(nodeCSRs(t, c, opts.NodeName)) != 1 {
		t.Errorf("second Bootstrap was not a no-op: kubeconfig changed %v, %s -> %s, %d CSRs",
			string(kubeconfigAfter) != string(kubeconfigBefore), target, targetAfter, len(nodeCSRs(t, c, opts.NodeName)))
	}
}

func TestIntegrationBootstrapReplacesUnusableCertificate(t *testing.T) {
	c := shared.Get(t)
	ca := c.CA(t)
	tests := []struct {
		desc  string
		files func(t *testing.T, name string) (certPEM, keyPEM []byte)
	}{
		{
			desc: "expired certificate",
			files: func(t *testing.T, name string) ([]byte, []byte) {
				return ca.IssueClient(t, "system:node:"+name, []string{"system:nodes"}, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
			},
		},
		{
			desc: "garbage certificate",
			files: func(t *testing.T, name string) ([]byte, []byte) {
				_, key := ca.IssueClient(t, "system:node:"+name, []string{"system:nodes"}, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
				return []byte("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n"), key
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			opts := newNode(t, c)
			dir := filepath.Dir(opts.KubeconfigPath)
			certPEM, keyPEM := tc.files(t, opts.NodeName)
			cfg := certKubeconfig(c.APIServer, ca.CertPEM, writeFile(t, dir, "old.crt", certPEM), writeFile(t, dir, "old.key", keyPEM))
			if err := clientcmd.WriteToFile(cfg, opts.KubeconfigPath); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := Bootstrap(ctx, opts); err != nil {
				t.Fatalf("Bootstrap: %v", err)
			}
			if state, err := checkKubeconfig(opts.KubeconfigPath, time.Now()); state != kubeconfigValid {
				t.Fatalf("kubeconfig after bootstrap: %v (%v)", state, err)
			}
			restCfg, err := loadRESTConfig(opts.KubeconfigPath)
			if err != nil {
				t.Fatal(err)
			}
			if want := filepath.Join(opts.CertDir, "kubelet-client-current.pem"); restCfg.CertFile != want {
				t.Errorf("kubeconfig certificate = %s, want %s", restCfg.CertFile, want)
			}
			checkNodeCert(t, c, restCfg.CertFile, opts.NodeName)
		})
	}
}

func TestIntegrationBootstrapReusesPendingKey(t *testing.T) {
	c := shared.Get(t)
	opts := newNode(t, c)
	// A kubelet that stopped while its request waited left its key behind.
	keyPEM, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(opts.CertDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, opts.CertDir, pendingKeyFile, keyPEM)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Bootstrap(ctx, opts); err != nil {
		t.Fatalf("Bootstrap: %v", err)
	}
	current := filepath.Join(opts.CertDir, "kubelet-client-current.pem")
	stored, err := os.ReadFile(current)
	if err != nil {
		t.Fatal(err)
	}
	if !samePrivateKey(t, stored, keyPEM) {
		t.Errorf("the certificate was requested for a new key, not the pending one")
	}
	checkNodeCert(t, c, current, opts.NodeName)
}

func TestIntegrationBootstrapBadToken(t *testing.T) {
	c := shared.Get(t)
	opts := newNode(t, c)
	kc, err := clientcmd.LoadFromFile(c.BootstrapKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.Token = "abcdef.0123456789abcdef"
	}
	opts.BootstrapKubeconfigPath = filepath.Join(t.TempDir(), "bootstrap-kubelet.conf")
	if err := clientcmd.WriteToFile(*kc, opts.BootstrapKubeconfigPath); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = Bootstrap(ctx, opts)
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") || !strings.Contains(err.Error(), "certificate signing request") {
		t.Fatalf("Bootstrap = %v, want an Unauthorized error creating the certificate signing request", err)
	}
	t.Logf("Bootstrap with a bad token: %v", err)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Bootstrap took %v to give up on bad credentials, want no retries", d)
	}
	if _, err := os.Stat(opts.KubeconfigPath); !os.IsNotExist(err) {
		t.Errorf("kubeconfig written despite the failure (%v)", err)
	}
}

func TestIntegrationRotation(t *testing.T) {
	c := shared.Get(t)
	opts := newNode(t, c)
	opts.RotateCertificates = true

	// A node certificate close to its end (past 90% of its lifetime, 20 s
	// left), in the store, and the kubeconfig Bootstrap would write.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	now := time.Now()
	store, old, client := startWithNodeCert(ctx, t, c, opts, now.Add(-time.Hour), now.Add(20*time.Second))
	if u := whoAmI(ctx, t, client); u.Username != "system:node:"+opts.NodeName {
		t.Fatalf("API server sees %q, want system:node:%s", u.Username, opts.NodeName)
	}

	// The manager renews at once: a new certificate becomes current.pem.
	renewed := waitRenewed(ctx, t, c, store.CurrentPath(), old.Leaf)
	checkNodeCert(t, c, store.CurrentPath(), opts.NodeName)
	if !renewed.NotAfter.After(old.Leaf.NotAfter.Add(time.Hour)) {
		t.Errorf("renewed certificate ends %v, want well after %v", renewed.NotAfter, old.Leaf.NotAfter)
	}

	// ... through a request made with the node's own credentials.
	var byNode []string
	for _, r := range nodeCSRs(t, c, opts.NodeName) {
		if r.Spec.Username == "system:node:"+opts.NodeName && r.Spec.SignerName == certificatesv1.KubeAPIServerClientKubeletSignerName &&
			len(r.Status.Certificate) > 0 {
			byNode = append(byNode, r.Name)
		}
	}
	if len(byNode) != 1 {
		t.Errorf("issued CSRs by system:node:%s = %v, want one", opts.NodeName, byNode)
	}

	// Once the old certificate has expired, the same client still
	// authenticates: its connections were re-established with the new one.
	time.Sleep(time.Until(old.Leaf.NotAfter) + time.Second)
	if u := whoAmI(ctx, t, client); u.Username != "system:node:"+opts.NodeName {
		t.Errorf("after the old certificate expired the API server sees %q, want system:node:%s", u.Username, opts.NodeName)
	}
}

// startWithNodeCert stores a certificate of the node valid from notBefore to
// notAfter (signed by the cluster CA), writes the kubeconfig Bootstrap would
// write for it, and starts the node's client with NewClientConfig. It returns
// the store, the stored certificate and the client.
func startWithNodeCert(ctx context.Context, t *testing.T, c *controlplane.Cluster, opts Options,
	notBefore, notAfter time.Time) (certificate.FileStore, *tls.Certificate, kubernetes.Interface) {
	t.Helper()
	certPEM, keyPEM := c.CA(t).IssueClient(t, controlplane.NodeUser(opts.NodeName), []string{controlplane.NodeGroup}, notBefore, notAfter)
	store, err := newFileStore(opts.CertDir, "", "", zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.Update(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	bootCfg, err := loadRESTConfig(c.BootstrapKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeKubeconfig(opts.KubeconfigPath, nodeKubeconfig(bootCfg, store.CurrentPath())); err != nil {
		t.Fatal(err)
	}
	return store, stored, newNodeClient(ctx, t, opts)
}

// newNodeClient is the node's client as the kubelet builds it (NewClientConfig).
func newNodeClient(ctx context.Context, t *testing.T, opts Options) kubernetes.Interface {
	t.Helper()
	cfg, err := NewClientConfig(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// waitRenewed waits (15 s at most) until path holds another certificate than
// old and returns it.
func waitRenewed(ctx context.Context, t *testing.T, c *controlplane.Cluster, path string, old *x509.Certificate) *x509.Certificate {
	t.Helper()
	var renewed *x509.Certificate
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
		certs, err := certutil.CertsFromFile(path)
		if err != nil || certs[0].SerialNumber.Cmp(old.SerialNumber) == 0 {
			return false, nil
		}
		renewed = certs[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s not renewed: %v\n%s", path, err, c.LogTail("kube-controller-manager", 20))
	}
	return renewed
}

func TestIntegrationRotationAfterExpiry(t *testing.T) {
	c := shared.Get(t)
	opts := newNode(t, c)
	opts.RotateCertificates = true

	// The kubelet was down while its certificate expired: the manager has no
	// valid certificate and requests one with the bootstrap kubeconfig.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now()
	store, old, client := startWithNodeCert(ctx, t, c, opts, now.Add(-2*time.Hour), now.Add(-time.Hour))
	waitRenewed(ctx, t, c, store.CurrentPath(), old.Leaf)
	checkNodeCert(t, c, store.CurrentPath(), opts.NodeName)
	// The store writes the file a moment before the manager serves the pair.
	var seen string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if seen = whoAmI(ctx, t, client).Username; seen == "system:node:"+opts.NodeName || time.Now().After(deadline) {
			break
		}
	}
	if seen != "system:node:"+opts.NodeName {
		t.Errorf("API server sees %q, want system:node:%s", seen, opts.NodeName)
	}
	for _, r := range nodeCSRs(t, c, opts.NodeName) {
		if !strings.HasPrefix(r.Spec.Username, "system:bootstrap:") {
			t.Errorf("CSR %s requested by %s, want the bootstrap token", r.Name, r.Spec.Username)
		}
	}
}
