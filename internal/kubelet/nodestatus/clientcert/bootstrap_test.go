package clientcert

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/keyutil"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

func TestBootstrapKey(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "test-ca")
	storedCert, storedKey := ca.IssueClient(t, "system:node:n1", nil, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	pendingKey, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		desc        string
		stored      bool   // the store has a current pair
		pending     []byte // content of the pending key file (nil = none)
		wantKey     []byte // the key returned (nil = a new one)
		wantPending bool   // the pending key file holds the returned key afterwards
	}{
		{desc: "nothing yet: a new key, kept pending", wantPending: true},
		{desc: "restart during approval: the pending key", pending: pendingKey, wantKey: pendingKey, wantPending: true},
		{desc: "corrupt pending key: replaced", pending: []byte("garbage"), wantPending: true},
		{desc: "kubeconfig lost, store intact: the stored key", stored: true, pending: pendingKey, wantKey: storedKey},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			store, err := newFileStore(dir, "", "", zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			if tc.stored {
				if _, err := store.Update(storedCert, storedKey); err != nil {
					t.Fatal(err)
				}
			}
			pendingPath := filepath.Join(dir, pendingKeyFile)
			if tc.pending != nil {
				writeFile(t, dir, pendingKeyFile, tc.pending)
			}
			got, err := bootstrapKey(store, pendingPath)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := keyutil.ParsePrivateKeyPEM(got); err != nil {
				t.Fatalf("returned key does not parse: %v", err)
			}
			if tc.wantKey != nil && !samePrivateKey(t, got, tc.wantKey) {
				t.Errorf("returned key is not the expected one")
			}
			if tc.wantKey == nil && (bytes.Equal(got, pendingKey) || bytes.Equal(got, storedKey)) {
				t.Errorf("returned an existing key, want a new one")
			}
			onDisk, err := os.ReadFile(pendingPath)
			if tc.wantPending {
				if err != nil || !bytes.Equal(onDisk, got) {
					t.Errorf("pending key file = %q (%v), want the returned key", onDisk, err)
				}
				if st, err := os.Stat(pendingPath); err != nil || st.Mode().Perm() != 0o600 {
					t.Errorf("pending key file mode = %v (%v), want 0600", st.Mode().Perm(), err)
				}
			}
		})
	}
}

// samePrivateKey compares two PEM private keys by their public halves.
func samePrivateKey(t *testing.T, a, b []byte) bool {
	t.Helper()
	ka, err := keyutil.ParsePrivateKeyPEM(a)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := keyutil.ParsePrivateKeyPEM(b)
	if err != nil {
		t.Fatal(err)
	}
	pa, _ := x509.MarshalPKIXPublicKey(ka.(crypto.Signer).Public())
	pb, _ := x509.MarshalPKIXPublicKey(kb.(crypto.Signer).Public())
	return bytes.Equal(pa, pb)
}

func TestCSRName(t *testing.T) {
	t.Parallel()
	newKey := func() crypto.PublicKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k.Public()
	}
	key, otherKey := newKey(), newKey()
	usages := []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageClientAuth}
	base, err := csrName(key, nodeSubject("n1"), usages)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base, "node-csr-") {
		t.Errorf("name %q lacks the node-csr- prefix", base)
	}
	if errs := validation.IsDNS1123Subdomain(base); len(errs) > 0 {
		t.Errorf("name %q is not a valid object name: %v", base, errs)
	}
	tests := []struct {
		desc     string
		key      crypto.PublicKey
		node     string
		usages   []certificatesv1.KeyUsage
		wantSame bool
	}{
		{desc: "same request", key: key, node: "n1", usages: usages, wantSame: true},
		{desc: "other key", key: otherKey, node: "n1", usages: usages},
		{desc: "other node", key: key, node: "n2", usages: usages},
		{desc: "other usages", key: key, node: "n1", usages: append([]certificatesv1.KeyUsage{certificatesv1.UsageKeyEncipherment}, usages...)},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			got, err := csrName(tc.key, nodeSubject(tc.node), tc.usages)
			if err != nil {
				t.Fatal(err)
			}
			if (got == base) != tc.wantSame {
				t.Errorf("name %q vs %q: same = %v, want %v", got, base, got == base, tc.wantSame)
			}
		})
	}
}

func TestIsTransient(t *testing.T) {
	t.Parallel()
	csrs := schema.GroupResource{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}
	refused := &url.Error{Op: "Post", URL: "https://127.0.0.1:6443/apis", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	tests := []struct {
		desc string
		err  error
		want bool
	}{
		{desc: "connection refused", err: refused, want: true},
		{desc: "wrapped connection refused", err: fmt.Errorf("create: %w", refused), want: true},
		{desc: "internal error", err: apierrors.NewInternalError(errors.New("etcd")), want: true},
		{desc: "service unavailable", err: apierrors.NewServiceUnavailable("starting"), want: true},
		{desc: "too many requests", err: apierrors.NewTooManyRequests("slow down", 1), want: true},
		{desc: "timeout", err: apierrors.NewTimeoutError("slow", 1), want: true},
		{desc: "unauthorized (bad token)", err: apierrors.NewUnauthorized("Unauthorized"), want: false},
		{desc: "forbidden (no RBAC)", err: apierrors.NewForbidden(csrs, "", errors.New("no")), want: false},
		{desc: "invalid", err: apierrors.NewBadRequest("bad"), want: false},
		{desc: "incompatible existing request", err: errors.New("retrieved csr is not compatible: csr subjects differ"), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := isTransient(tc.err); got != tc.want {
				t.Errorf("isTransient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
