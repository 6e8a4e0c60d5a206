package controlplane

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// NodeGroup is the group of every node's credentials.
const NodeGroup = "system:nodes"

// NodeUser is the user name of node nodeName's credentials.
func NodeUser(nodeName string) string { return "system:node:" + nodeName }

// CA loads the cluster CA (pki/ca.crt and pki/ca.key), for tests that sign
// certificates of their own, such as expired or short-lived ones.
func (c *Cluster) CA(t testing.TB) *testca.CA {
	t.Helper()
	return testca.Load(t, c.CAFile, c.CAKeyFile)
}

// SignClientCert signs a client certificate for cn in the groups orgs with
// the cluster CA, valid from a minute ago for ttl, and returns the
// certificate and its key (PEM).
func (c *Cluster) SignClientCert(t testing.TB, cn string, orgs []string, ttl time.Duration) (certPEM, keyPEM []byte) {
	t.Helper()
	now := time.Now()
	return c.CA(t).IssueClient(t, cn, orgs, now.Add(-time.Minute), now.Add(ttl))
}

// NodeRESTConfig is a client config for the API server with node
// nodeName's credentials (CN system:node:<name>, O system:nodes, valid for a
// day), so that the Node authorizer and NodeRestriction apply as to a real
// kubelet.
func (c *Cluster) NodeRESTConfig(t testing.TB, nodeName string) *rest.Config {
	t.Helper()
	certPEM, keyPEM := c.SignClientCert(t, NodeUser(nodeName), []string{NodeGroup}, 24*time.Hour)
	return &rest.Config{Host: c.APIServer, TLSClientConfig: rest.TLSClientConfig{CAFile: c.CAFile, CertData: certPEM, KeyData: keyPEM}}
}

// NodeClient is a clientset of NodeRESTConfig.
func (c *Cluster) NodeClient(t testing.TB, nodeName string) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(c.NodeRESTConfig(t, nodeName))
	if err != nil {
		t.Fatalf("client of node %s: %v", nodeName, err)
	}
	return client
}

// CreateNode creates node through client (the admin client when nil; a
// node's own client registers it as a kubelet does) and, when the test ends,
// deletes it and its Lease with the admin client.
func (c *Cluster) CreateNode(ctx context.Context, t testing.TB, client kubernetes.Interface, node *v1.Node) *v1.Node {
	t.Helper()
	if client == nil {
		client = c.Client
	}
	created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", node.Name, err)
	}
	t.Cleanup(func() { c.DeleteNode(t, node.Name) })
	return created
}

// DeleteNode deletes a Node and its Lease with the admin client; missing
// ones are fine, other errors fail the test.
func (c *Cluster) DeleteNode(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete node %s: %v", name, err)
	}
	err := c.Client.CoordinationV1().Leases(v1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete the lease of node %s: %v", name, err)
	}
}

// CreateNamespace creates a namespace named prefix plus a random suffix with
// the admin client and deletes it when the test ends.
func (c *Cluster) CreateNamespace(ctx context.Context, t testing.TB, prefix string) string {
	t.Helper()
	ns, err := c.Client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s*: %v", prefix, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns.Name, err)
		}
	})
	return ns.Name
}
