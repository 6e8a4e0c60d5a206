//go:build linux

package controlplane

import (
	"context"
	"crypto/x509"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// TestIntegrationSharedAndNodeCredentials: Shared starts one control plane on
// first use and Stop removes it; a NodeClient is seen as the node by the API
// server and may register its Node (NodeRestriction), which CreateNode removes
// when the (sub)test ends.
func TestIntegrationSharedAndNodeCredentials(t *testing.T) {
	var shared Shared
	defer func() {
		if err := shared.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}()
	c := shared.Get(t)
	if again := shared.Get(t); again != c {
		t.Fatal("a second Get started another control plane")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const node = "cp-test-node"
	t.Run("node client", func(t *testing.T) {
		client := c.NodeClient(t, node)
		r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectReview: %v", err)
		}
		if u := r.Status.UserInfo; u.Username != NodeUser(node) || !slices.Contains(u.Groups, NodeGroup) {
			t.Errorf("the API server sees %+v, want %s in %s", u, NodeUser(node), NodeGroup)
		}
		created := c.CreateNode(ctx, t, client, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
		if created.UID == "" {
			t.Errorf("created node has no UID: %+v", created.ObjectMeta)
		}
		// NodeRestriction: a node may not create another node.
		other := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-test-other"}}
		if _, err := client.CoreV1().Nodes().Create(ctx, other, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("creating another node: %v, want Forbidden", err)
		}
	})
	if _, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node after its test ended: %v, want NotFound", err)
	}

	certPEM, _ := c.SignClientCert(t, "someone", []string{"team"}, time.Minute)
	leaf := testca.ParseCert(t, certPEM)
	roots := x509.NewCertPool()
	roots.AddCert(c.CA(t).Cert)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("SignClientCert: not a client certificate of the cluster CA: %v", err)
	}
	if life := leaf.NotAfter.Sub(leaf.NotBefore); leaf.Subject.CommonName != "someone" || life != 2*time.Minute {
		t.Errorf("SignClientCert: %s valid for %v, want CN=someone valid from a minute ago for a minute", leaf.Subject, life)
	}
}
