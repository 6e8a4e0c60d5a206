package apiobjects

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// selfSigned returns the PEM certificate of a new self-signed CA named cn.
func selfSigned(t *testing.T, cn string) string { return string(testca.New(t, cn).CertPEM) }

func TestTrustAnchors(t *testing.T) {
	t.Parallel()
	a, b, c := selfSigned(t, "a"), selfSigned(t, "b"), selfSigned(t, "c")
	ctb := func(name, signer string, labels map[string]string, pems ...string) runtime.Object {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: strings.Join(pems, "\n")}}
	}
	o, _, _ := newTestObjects(t,
		ctb("plain", "", nil, a, a, b), // a duplicate inside one bundle
		ctb("example.com:s:one", "example.com/s", map[string]string{"alive": "true"}, a, c),
		ctb("example.com:s:two", "example.com/s", map[string]string{"alive": "true"}, b, c),
		ctb("example.com:s:old", "example.com/s", map[string]string{"alive": "false"}, selfSigned(t, "old")),
		ctb("other.com:s:x", "other.com/s", map[string]string{"alive": "true"}, selfSigned(t, "other")),
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	if _, err := o.TrustAnchorsByName(ctx, "plain", false); err == nil {
		t.Error("TrustAnchorsByName before Start: no error")
	}
	go func() { o.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, o.HasSynced)

	certs := func(b []byte) map[string]bool {
		out := map[string]bool{}
		for rest := b; ; {
			var blk *pem.Block
			if blk, rest = pem.Decode(rest); blk == nil {
				return out
			}
			if blk.Type != "CERTIFICATE" {
				t.Errorf("block type %q", blk.Type)
			}
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			if out[cert.Subject.CommonName] {
				t.Errorf("%s twice", cert.Subject.CommonName)
			}
			out[cert.Subject.CommonName] = true
		}
	}
	got, err := o.TrustAnchorsByName(ctx, "plain", false)
	if err != nil {
		t.Fatal(err)
	}
	if c := certs(got); len(c) != 2 || !c["a"] || !c["b"] {
		t.Errorf("by name: %v", c)
	}
	alive := &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "true"}}
	got, err = o.TrustAnchorsBySigner(ctx, "example.com/s", alive, false)
	if err != nil {
		t.Fatal(err)
	}
	if c := certs(got); len(c) != 3 || !c["a"] || !c["b"] || !c["c"] {
		t.Errorf("by signer, alive=true: %v", c)
	}
	again, _ := o.TrustAnchorsBySigner(ctx, "example.com/s", alive, false)
	if !bytes.Equal(got, again) {
		t.Error("the order changed between two calls")
	}
	all, err := o.TrustAnchorsBySigner(ctx, "example.com/s", &metav1.LabelSelector{}, false)
	if c := certs(all); err != nil || len(c) != 4 {
		t.Errorf("by signer, empty selector (all): %v, %v", c, err)
	}
	// A nil selector selects nothing.
	if _, err := o.TrustAnchorsBySigner(ctx, "example.com/s", nil, false); err == nil || !strings.Contains(err.Error(), "matched zero ClusterTrustBundles") {
		t.Errorf("nil selector: %v", err)
	}
	if b, err := o.TrustAnchorsBySigner(ctx, "example.com/s", nil, true); err != nil || len(b) != 0 {
		t.Errorf("nil selector, optional: %q, %v", b, err)
	}
	if _, err := o.TrustAnchorsByName(ctx, "gone", false); err == nil {
		t.Error("missing bundle: no error")
	}
	if b, err := o.TrustAnchorsByName(ctx, "gone", true); err != nil || len(b) != 0 {
		t.Errorf("missing bundle, optional: %q, %v", b, err)
	}
}
