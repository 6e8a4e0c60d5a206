//go:build linux

package auth

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// randomName is prefix plus a random suffix.
func randomName(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// apiserverClientCert is the pair the kube-apiserver presents to kubelets.
func apiserverClientCert(t *testing.T, c *controlplane.Cluster) tls.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(c.Dir, "pki", "apiserver-kubelet-client.crt"),
		filepath.Join(c.Dir, "pki", "apiserver-kubelet-client.key"))
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// whoAmIHandler answers "ok <user>" with the authenticated user.
func whoAmIHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := UserFrom(r.Context())
		fmt.Fprintf(w, "ok %s", u.GetName())
	})
}

// caller makes requests to a kubelet API address.
type caller struct {
	addr string
	tls  *tls.Config
}

// do sends method path with an optional bearer token and returns status and body.
func (k caller) do(t *testing.T, method, path, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, "https://"+k.addr+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	cfg := k.tls
	if cfg == nil {
		cfg = &tls.Config{InsecureSkipVerify: true} // the kubelet's self-signed certificate
	}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// expect checks one request's status and body.
func (k caller) expect(t *testing.T, method, path, token string, wantStatus int, wantBody string) {
	t.Helper()
	status, body := k.do(t, method, path, token)
	if status != wantStatus || strings.TrimSpace(body) != wantBody {
		t.Errorf("%s %s: %d %q, want %d %q", method, path, status, body, wantStatus, wantBody)
	}
}

// eventually polls the request until it answers wantStatus (the webhook
// caches must expire first).
func (k caller) eventually(t *testing.T, method, path, token string, wantStatus int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, body := k.do(t, method, path, token)
		if status == wantStatus {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: still %d %q, want %d", method, path, status, body, wantStatus)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startKubeletAPI serves Filter(whoAmIHandler) with a self-signed certificate
// for node name, authenticating and authorizing through the node's client;
// everything stops when the test ends.
func startKubeletAPI(t *testing.T, c *controlplane.Cluster, name string) string {
	t.Helper()
	certDir := t.TempDir() // removed after cancel stopped the file watch
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a, err := New(Options{Client: c.NodeClient(t, name), NodeName: name, ClientCAFile: c.CAFile,
		WebhookAuthnEnabled: true, WebhookAuthnCacheTTL: time.Second, AuthorizationMode: ModeWebhook,
		WebhookAuthzAuthorizedTTL: time.Second, WebhookAuthzUnauthorizedTTL: time.Second, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	go a.Run(ctx)
	cfg, err := ServingTLSConfig(ctx, ServingOptions{CertDir: certDir, NodeName: name,
		IPs: []net.IP{net.ParseIP("127.0.0.1")}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, cfg, a.Filter(whoAmIHandler()))
}

// testNamespace creates a namespace deleted at the end of the test.
func testNamespace(t *testing.T, c *controlplane.Cluster) string {
	t.Helper()
	ns, err := c.Client.CoreV1().Namespaces().Create(context.Background(),
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kubelet-auth-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// serviceAccountToken creates service account ns/name and returns a token for it.
func serviceAccountToken(t *testing.T, c *controlplane.Cluster, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx,
		&v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// grant binds service account ns/sa to a new ClusterRole with rules (both
// deleted at the end of the test), or to the existing ClusterRole role when
// rules is nil.
func grant(t *testing.T, c *controlplane.Cluster, ns, sa, role string, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	rbac := c.Client.RbacV1()
	if rules != nil {
		if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role}, Rules: rules},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), role, metav1.DeleteOptions{}) })
	}
	binding := randomName(role + "-")
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), binding, metav1.DeleteOptions{}) })
}

// nodeRule allows verbs on nodes/<subresource> (every node).
func nodeRule(subresource string, verbs ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes/" + subresource}, Verbs: verbs}
}

func TestIntegrationAuthentication(t *testing.T) {
	c := shared.Get(t)
	name := randomName("auth-")
	addr := startKubeletAPI(t, c, name)
	apiserver := caller{addr: addr, tls: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{apiserverClientCert(t, c)}}}
	anonymous := caller{addr: addr}
	strangerPEM, strangerKey := testca.New(t, "other-ca").Issue(t, testca.Cert{CommonName: "kube-apiserver-kubelet-client",
		Organizations: []string{"system:masters"}})
	strangerPair, err := tls.X509KeyPair(strangerPEM, strangerKey)
	if err != nil {
		t.Fatal(err)
	}
	stranger := caller{addr: addr, tls: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{strangerPair}}}

	t.Run("apiserver client certificate passes", func(t *testing.T) {
		for _, p := range []struct{ method, path string }{{"GET", "/pods"}, {"GET", "/stats/summary"},
			{"POST", "/exec/ns/pod/c?command=id"}, {"GET", "/containerLogs/ns/pod/c"}, {"GET", "/metrics/resource"}} {
			apiserver.expect(t, p.method, p.path, "", http.StatusOK, "ok kube-apiserver-kubelet-client")
		}
	})
	t.Run("no credentials", func(t *testing.T) {
		anonymous.expect(t, "GET", "/pods", "", http.StatusUnauthorized, "Unauthorized")
		anonymous.expect(t, "GET", "/healthz", "", http.StatusUnauthorized, "Unauthorized")
	})
	t.Run("invalid token", func(t *testing.T) {
		anonymous.expect(t, "GET", "/pods", "not-a-token", http.StatusUnauthorized, "Unauthorized")
	})
	t.Run("certificate of another CA", func(t *testing.T) {
		stranger.expect(t, "GET", "/pods", "", http.StatusUnauthorized, "Unauthorized")
	})
	t.Run("bootstrap token is reviewed but not authorized", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(c.Dir, "bootstrap-token"))
		if err != nil {
			t.Fatal(err)
		}
		token := strings.TrimSpace(string(data))
		id, _, _ := strings.Cut(token, ".")
		anonymous.expect(t, "GET", "/metrics", token, http.StatusForbidden,
			"Forbidden (user=system:bootstrap:"+id+", verb=get, resource=nodes, subresource(s)=[metrics])")
	})
	t.Run("cluster-admin service account token", func(t *testing.T) {
		ns := testNamespace(t, c)
		token := serviceAccountToken(t, c, ns, "admin")
		grant(t, c, ns, "admin", "cluster-admin", nil)
		anonymous.eventually(t, "POST", "/exec/ns/pod/c", token, http.StatusOK)
		anonymous.expect(t, "GET", "/pods", token, http.StatusOK, "ok system:serviceaccount:"+ns+":admin")
	})
}

func TestIntegrationAuthorization(t *testing.T) {
	c := shared.Get(t)
	name := randomName("authz-")
	k := caller{addr: startKubeletAPI(t, c, name)}
	ns := testNamespace(t, c)
	token := serviceAccountToken(t, c, ns, "viewer")
	who := "system:serviceaccount:" + ns + ":viewer"
	forbidden := func(verb, subresources string) string {
		return fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=[%s])", who, verb, subresources)
	}

	t.Run("no RBAC: refused", func(t *testing.T) {
		k.expect(t, "GET", "/stats/summary", token, http.StatusForbidden, forbidden("get", "stats"))
		k.expect(t, "GET", "/pods", token, http.StatusForbidden, forbidden("get", "pods proxy"))
		k.expect(t, "POST", "/exec/ns/pod/c?command=id", token, http.StatusForbidden, forbidden("create", "proxy"))
		k.expect(t, "GET", "/containerLogs/ns/pod/c", token, http.StatusForbidden, forbidden("get", "proxy"))
	})
	t.Run("nodes/stats and nodes/pods", func(t *testing.T) {
		grant(t, c, ns, "viewer", randomName("kubelet-auth-stats-"),
			[]rbacv1.PolicyRule{nodeRule("stats", "get"), nodeRule("pods", "get")})
		k.eventually(t, "GET", "/stats/summary", token, http.StatusOK)
		k.eventually(t, "GET", "/pods", token, http.StatusOK)
		k.expect(t, "GET", "/stats/summary?only_cpu_and_memory=true", token, http.StatusOK, "ok "+who)
		k.expect(t, "GET", "/metrics", token, http.StatusForbidden, forbidden("get", "metrics"))
		k.expect(t, "POST", "/exec/ns/pod/c", token, http.StatusForbidden, forbidden("create", "proxy"))
		k.expect(t, "POST", "/stats/../exec/ns/pod/c", token, http.StatusForbidden, forbidden("create", "proxy"))
		k.expect(t, "GET", "/stats/%2e%2e/containerLogs/ns/pod/c", token, http.StatusForbidden, forbidden("get", "proxy"))
	})
	t.Run("nodes/proxy of another node", func(t *testing.T) {
		role := randomName("kubelet-auth-other-")
		rule := nodeRule("proxy", "get", "create")
		rule.ResourceNames = []string{"some-other-node"}
		grant(t, c, ns, "viewer", role, []rbacv1.PolicyRule{rule})
		time.Sleep(2 * time.Second) // past the deny TTL
		k.expect(t, "POST", "/exec/ns/pod/c", token, http.StatusForbidden, forbidden("create", "proxy"))
	})
	t.Run("nodes/proxy of this node", func(t *testing.T) {
		role := randomName("kubelet-auth-proxy-")
		rule := nodeRule("proxy", "get", "create")
		rule.ResourceNames = []string{name}
		grant(t, c, ns, "viewer", role, []rbacv1.PolicyRule{rule})
		k.eventually(t, "POST", "/exec/ns/pod/c?command=id", token, http.StatusOK)
		k.expect(t, "GET", "/containerLogs/ns/pod/c", token, http.StatusOK, "ok "+who)
		k.expect(t, "DELETE", "/pods", token, http.StatusForbidden, forbidden("delete", "pods proxy"))
	})
}

// TestIntegrationAPIServerToKubelet: the real kube-apiserver reaches the
// kubelet API (for kubectl logs) with its kubelet client certificate and is
// let in. (Node proxy, /api/v1/nodes/<n>/proxy/..., refuses loopback node
// addresses, so it cannot be used with a node on 127.0.0.1.)
func TestIntegrationAPIServerToKubelet(t *testing.T) {
	c := shared.Get(t)
	ctx := context.Background()
	name := randomName("apiserver-")
	addr := startKubeletAPI(t, c, name)
	_, portStr, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portStr)
	nodes := c.Client.CoreV1().Nodes()
	if _, err := nodes.Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nodes.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// The node lifecycle controller edits new nodes too: retry on conflict.
	if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node, err := nodes.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "127.0.0.1"}}
		node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ns := testNamespace(t, c)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{NodeName: name,
		Containers: []v1.Container{{Name: "c", Image: "busybox:local"}}}}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	body, err := c.Client.CoreV1().Pods(ns).GetLogs("p", &v1.PodLogOptions{Container: "c"}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("pod logs through the API server: %v (%s)", err, body)
	}
	if got := string(body); got != "ok kube-apiserver-kubelet-client" {
		t.Errorf("the kubelet API answered the API server %q", got)
	}
}
