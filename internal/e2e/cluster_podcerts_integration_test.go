//go:build linux

package e2e

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// podCertPodYAML is a pod with a podCertificate projection written three
// ways (a credential bundle, a key file and a chain file) that prints them
// and the key file's mode.
const podCertPodYAML = `apiVersion: v1
kind: Pod
metadata: {name: certs, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c"]
    args:
    - |
      echo BUNDLE-BEGIN; cat /certs/bundle.pem; echo BUNDLE-END
      echo CHAIN-BEGIN; cat /certs/tls.crt; echo CHAIN-END
      echo KEY-BEGIN; cat /certs/tls.key; echo KEY-END
      echo "MODE=$(stat -L -c %a /certs/tls.key)"
      echo DONE
      sleep 3600
    volumeMounts: [{name: certs, mountPath: /certs}]
  volumes:
  - name: certs
    projected:
      sources:
      - podCertificate:
          signerName: example.com/e2e
          keyType: ED25519
          maxExpirationSeconds: 3600
          credentialBundlePath: bundle.pem
          keyPath: tls.key
          certificateChainPath: tls.crt
`

// testPodCertificate runs a pod with a podCertificate projection: the
// kubelet makes an ED25519 key and a PodCertificateRequest naming the pod,
// its service account and the node; the test issues it as a signer would;
// the pod starts and reads the issued chain and the key the certificate was
// issued to, in the three files asked for (mode 0644, the default).
func testPodCertificate(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	n.waitNodeReady(60 * time.Second)
	n.applyYAML(podCertPodYAML)
	ctx := context.Background()

	var pcr *certificatesv1.PodCertificateRequest
	n.poll(60*time.Second, "the kubelet's PodCertificateRequest", func() (bool, string) {
		list, err := c.Client.CertificatesV1().PodCertificateRequests(n.ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return false, "none yet"
		}
		pcr = &list.Items[0]
		return true, ""
	})
	if s := pcr.Spec; s.PodName != "certs" || string(s.NodeName) != n.name || s.ServiceAccountName != "default" ||
		s.SignerName != "example.com/e2e" || s.MaxExpirationSeconds == nil || *s.MaxExpirationSeconds != 3600 {
		t.Errorf("request spec: %+v", s)
	}
	csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
	if err != nil {
		t.Fatalf("the stub request: %v", err)
	}
	ca := testca.New(t, "e2e-pod-signer")
	notBefore := time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second)
	notAfter := notBefore.Add(time.Hour)
	chain := string(ca.IssueFor(t, csr.PublicKey, testca.Cert{CommonName: "certs", NotBefore: notBefore, NotAfter: notAfter})) + string(ca.CertPEM)
	pcr.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", Message: "issued by the e2e test", LastTransitionTime: metav1.Now()}},
		CertificateChain: chain, NotBefore: ptr.To(metav1.NewTime(notBefore)), NotAfter: ptr.To(metav1.NewTime(notAfter)),
		BeginRefreshAt: ptr.To(metav1.NewTime(notAfter.Add(-20 * time.Minute))),
	}
	if _, err := c.Client.CertificatesV1().PodCertificateRequests(n.ns).UpdateStatus(ctx, pcr, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("issue %s: %v", pcr.Name, err)
	}

	p := n.waitAPIPod("certs", podStartTimeout, "running", runningAndReady)
	lines := strings.Split(n.waitLog(p, "main", "DONE\n", 30*time.Second), "\n")
	gotChain := strings.Join(between(lines, "CHAIN-BEGIN", "CHAIN-END"), "\n") + "\n"
	gotKey := strings.Join(between(lines, "KEY-BEGIN", "KEY-END"), "\n") + "\n"
	if gotChain != chain {
		t.Errorf("tls.crt:\n%s\nwant the issued chain:\n%s", gotChain, chain)
	}
	if bundle := strings.Join(between(lines, "BUNDLE-BEGIN", "BUNDLE-END"), "\n") + "\n"; bundle != gotKey+chain {
		t.Errorf("bundle.pem is not the key then the chain:\n%s", bundle)
	}
	if !strings.Contains(strings.Join(lines, "\n"), "MODE=644") {
		t.Errorf("tls.key mode is not 644: %q", lines)
	}
	b, _ := pem.Decode([]byte(gotKey))
	if b == nil || b.Type != "PRIVATE KEY" {
		t.Fatalf("tls.key is not a PEM PRIVATE KEY: %q", gotKey)
	}
	key, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		t.Fatalf("tls.key: %v", err)
	}
	leaf := testca.ParseCert(t, []byte(gotChain))
	if signer, ok := key.(crypto.Signer); !ok || !signer.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
		t.Errorf("tls.key (%T) is not the key the certificate was issued to", key)
	}
}
