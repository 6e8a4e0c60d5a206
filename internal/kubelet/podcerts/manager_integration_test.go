//go:build linux

package podcerts

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

// shared is the package's control plane, started by the first test that
// needs it and stopped by TestMain.
var shared controlplane.Shared

func TestMain(m *testing.M) { os.Exit(shared.Run(m)) }

// podSet stands in for the pod manager.
type podSet struct {
	mu   sync.Mutex
	pods map[types.UID]*v1.Pod
}

func (s *podSet) Get(uid types.UID) (*v1.Pod, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pods[uid]
	return p, ok
}

func (s *podSet) set(p *v1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods[p.UID] = p
}

func (s *podSet) remove(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, uid)
}

// fixture is a node, a namespace with service account "app", the manager
// acting as that node's kubelet, and a CA acting as the signer.
type fixture struct {
	c      *controlplane.Cluster
	ns     string
	node   *v1.Node
	sa     *v1.ServiceAccount
	pods   *podSet
	clock  *testingclock.FakePassiveClock
	events *record.FakeRecorder
	reg    *prometheus.Registry
	m      *Manager
	ca     *testca.CA
}

func TestIntegrationPodCertificates(t *testing.T) {
	c := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := &fixture{c: c, pods: &podSet{pods: map[types.UID]*v1.Pod{}}, clock: testingclock.NewFakePassiveClock(time.Now()),
		events: record.NewFakeRecorder(100), reg: prometheus.NewRegistry(), ca: testca.New(t, "podcerts-test-signer")}
	nodeName := "podcerts-" + rand.String(5)
	nodeClient := c.NodeClient(t, nodeName)
	f.node = c.CreateNode(ctx, t, nodeClient, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	f.ns = c.CreateNamespace(ctx, t, "podcerts-")
	var err error
	f.sa, err = c.Client.CoreV1().ServiceAccounts(f.ns).Create(ctx, &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f.m, err = New(Options{Client: nodeClient, NodeName: nodeName, Node: func() (*v1.Node, bool) { return f.node, true },
		Pods: f.pods, Recorder: f.events, Registerer: f.reg, Clock: f.clock, RefreshPeriod: 100 * time.Millisecond,
		IssueWait: time.Minute, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	if err := f.m.Start(runCtx); err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); f.m.Wait() }()

	t.Run("issued, then replaced from beginRefreshAt on", func(t *testing.T) {
		const signer = "example.com/issue"
		pod := f.createPod(ctx, t, "issued", signer, map[string]string{"example.com/spiffe-path": "/web"})
		res := f.bundleAsync(ctx, pod)
		pcr := f.waitRequest(ctx, t, pod, nil)
		want := certificatesv1.PodCertificateRequestSpec{
			SignerName: signer, PodName: pod.Name, PodUID: pod.UID, ServiceAccountName: "app", ServiceAccountUID: f.sa.UID,
			NodeName: types.NodeName(f.node.Name), NodeUID: f.node.UID, MaxExpirationSeconds: ptr.To[int32](7200),
			UnverifiedUserAnnotations: map[string]string{"example.com/spiffe-path": "/web"},
		}
		got := pcr.Spec
		got.StubPKCS10Request = nil
		if got.SignerName != want.SignerName || got.PodName != want.PodName || got.PodUID != want.PodUID ||
			got.ServiceAccountName != want.ServiceAccountName || got.ServiceAccountUID != want.ServiceAccountUID ||
			got.NodeName != want.NodeName || got.NodeUID != want.NodeUID || *got.MaxExpirationSeconds != *want.MaxExpirationSeconds ||
			got.UnverifiedUserAnnotations["example.com/spiffe-path"] != "/web" {
			t.Errorf("request spec = %+v, want %+v", got, want)
		}
		if !strings.HasPrefix(pcr.Name, "req-") || len(pcr.OwnerReferences) != 1 || pcr.OwnerReferences[0].UID != pod.UID || pcr.OwnerReferences[0].Kind != "Pod" {
			t.Errorf("request %s owners %+v: want generated req-*, owned by the pod", pcr.Name, pcr.OwnerReferences)
		}
		chain1, notAfter1 := f.issue(ctx, t, pcr)
		r := <-res
		if r.err != nil {
			t.Fatalf("CredentialBundle: %v", r.err)
		}
		if !bytes.Equal(r.chain, chain1) {
			t.Errorf("chain:\n%s\nwant the issued one:\n%s", r.chain, chain1)
		}
		checkKeyMatches(t, r.key, r.chain)
		f.wantMetric(t, signer, "fresh", 1)

		// Past notAfter (and so past beginRefreshAt plus the overdue delay):
		// a successor is requested, both warnings are emitted once, and the
		// current credential is served meanwhile.
		f.clock.SetTime(notAfter1.Add(time.Minute))
		next := f.waitRequest(ctx, t, pod, map[string]bool{pcr.Name: true})
		f.wantMetric(t, signer, "expired", 1)
		f.wantEvents(t, "Warning CertificateOverdueForRefresh PodCertificate refresh overdue", "Warning CertificateExpired PodCertificate expired")
		key, chain, err := f.m.CredentialBundle(ctx, pod, "certs", 1, signer)
		if err != nil || !bytes.Equal(key, r.key) || !bytes.Equal(chain, chain1) {
			t.Fatalf("while the refresh is pending: %v (same key %v, same chain %v); want the current credential",
				err, bytes.Equal(key, r.key), bytes.Equal(chain, chain1))
		}
		f.clock.SetTime(time.Now())
		chain2, _ := f.issue(ctx, t, next)
		eventually(ctx, t, "the successor served", func() bool {
			_, chain, _ := f.m.CredentialBundle(ctx, pod, "certs", 1, signer)
			return bytes.Equal(chain, chain2)
		})
		key, chain, _ = f.m.CredentialBundle(ctx, pod, "certs", 1, signer)
		if bytes.Equal(key, r.key) {
			t.Error("the successor reuses the first private key")
		}
		checkKeyMatches(t, key, chain)
		f.wantMetric(t, signer, "fresh", 1)
	})

	t.Run("denied: the reason reported and final", func(t *testing.T) {
		const signer = "example.com/deny"
		pod := f.createPod(ctx, t, "denied", signer, nil)
		res := f.bundleAsync(ctx, pod)
		pcr := f.waitRequest(ctx, t, pod, nil)
		pcr.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue,
			Reason: "NotAllowed", Message: "no certificates for this pod", LastTransitionTime: metav1.Now()}}
		if _, err := c.Client.CertificatesV1().PodCertificateRequests(f.ns).UpdateStatus(ctx, pcr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := <-res
		const want = `PodCertificateRequest was permanently denied: reason="NotAllowed" message="no certificates for this pod"`
		if r.err == nil || r.err.Error() != want {
			t.Fatalf("CredentialBundle error = %v, want %s", r.err, want)
		}
		f.wantEvents(t, `Warning Denied PodCertificateRequest `+f.ns+"/"+pcr.Name+` was denied, reason="NotAllowed", message="no certificates for this pod"`)
		f.wantMetric(t, signer, "denied", 1)
	})

	t.Run("not issued: the wait ends with the caller, forgotten with the pod", func(t *testing.T) {
		const signer = "example.com/never"
		pod := f.createPod(ctx, t, "pending", signer, nil)
		waitCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, _, err := f.m.CredentialBundle(waitCtx, pod, "certs", 1, signer)
		if !errors.Is(err, errNotIssued) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("CredentialBundle error = %v, want %q and the caller's deadline", err, errNotIssued)
		}
		f.wantMetric(t, signer, "not_yet_issued", 1)
		f.pods.remove(pod.UID)
		eventually(ctx, t, "the projection forgotten", func() bool { return f.metric(t, signer, "not_yet_issued") == 0 })
	})
}

// createPod creates a pod bound to the node with a projected volume "certs"
// whose source 1 is a podCertificate of signer (source 0 a downwardAPI
// file), and adds it to the node's pods.
func (f *fixture) createPod(ctx context.Context, t *testing.T, name, signer string, annotations map[string]string) *v1.Pod {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
		Spec: v1.PodSpec{
			NodeName: f.node.Name, ServiceAccountName: "app",
			Containers: []v1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			Volumes: []v1.Volume{{Name: "certs", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
				{PodCertificate: &v1.PodCertificateProjection{SignerName: signer, KeyType: "ECDSAP256", CredentialBundlePath: "bundle.pem",
					MaxExpirationSeconds: ptr.To[int32](7200), UserAnnotations: annotations}},
			}}}}},
		},
	}
	created, err := f.c.Client.CoreV1().Pods(f.ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	f.pods.set(created)
	return created
}

type bundleResult struct {
	key, chain []byte
	err        error
}

// bundleAsync asks for pod's credential in the background (it waits for the
// signer, which the test plays).
func (f *fixture) bundleAsync(ctx context.Context, pod *v1.Pod) <-chan bundleResult {
	res := make(chan bundleResult, 1)
	go func() {
		key, chain, err := f.m.CredentialBundle(ctx, pod, "certs", 1, pod.Spec.Volumes[0].Projected.Sources[1].PodCertificate.SignerName)
		res <- bundleResult{key, chain, err}
	}()
	return res
}

// waitRequest returns the pod's first PodCertificateRequest not in seen.
func (f *fixture) waitRequest(ctx context.Context, t *testing.T, pod *v1.Pod, seen map[string]bool) *certificatesv1.PodCertificateRequest {
	t.Helper()
	var found *certificatesv1.PodCertificateRequest
	eventually(ctx, t, "a PodCertificateRequest of pod "+pod.Name, func() bool {
		list, err := f.c.Client.CertificatesV1().PodCertificateRequests(f.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			if list.Items[i].Spec.PodUID == pod.UID && !seen[list.Items[i].Name] {
				found = &list.Items[i]
				return true
			}
		}
		return false
	})
	return found
}

// issue signs pcr's public key as a signer does (valid from 2 minutes ago
// for 2 hours, refresh 30 minutes before the end) and returns the chain
// written to the status (leaf then CA) and notAfter.
func (f *fixture) issue(ctx context.Context, t *testing.T, pcr *certificatesv1.PodCertificateRequest) ([]byte, time.Time) {
	t.Helper()
	csr, err := x509.ParseCertificateRequest(pcr.Spec.StubPKCS10Request)
	if err != nil {
		t.Fatalf("the stub request: %v", err)
	}
	notBefore := time.Now().Add(-2 * time.Minute).UTC().Truncate(time.Second)
	notAfter := notBefore.Add(2 * time.Hour)
	leaf := f.ca.IssueFor(t, csr.PublicKey, testca.Cert{CommonName: pcr.Spec.PodName, NotBefore: notBefore, NotAfter: notAfter,
		Usage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	chain := append(append([]byte{}, leaf...), f.ca.CertPEM...)
	pcr = pcr.DeepCopy()
	pcr.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", Message: "issued by the test", LastTransitionTime: metav1.Now()}},
		CertificateChain: string(chain),
		NotBefore:        ptr.To(metav1.NewTime(notBefore)), NotAfter: ptr.To(metav1.NewTime(notAfter)),
		BeginRefreshAt: ptr.To(metav1.NewTime(notAfter.Add(-30 * time.Minute))),
	}
	if _, err := f.c.Client.CertificatesV1().PodCertificateRequests(pcr.Namespace).UpdateStatus(ctx, pcr, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("issue %s: %v", pcr.Name, err)
	}
	return chain, notAfter
}

// checkKeyMatches checks that key is a PKCS#8 "PRIVATE KEY" block whose
// public key is the first certificate's of chain.
func checkKeyMatches(t *testing.T, key, chain []byte) {
	t.Helper()
	kb, _ := pem.Decode(key)
	if kb == nil || kb.Type != "PRIVATE KEY" {
		t.Fatalf("key is not a PEM PRIVATE KEY: %q", key)
	}
	priv, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		t.Fatalf("key: %v", err)
	}
	leaf := testca.ParseCert(t, chain)
	signer, ok := priv.(crypto.Signer)
	if !ok {
		t.Fatalf("key %T cannot sign", priv)
	}
	if !signer.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
		t.Error("the private key is not the leaf certificate's")
	}
}

// metric returns kubelet_podcertificate_states{signer_name, state}; 0 when absent.
func (f *fixture) metric(t *testing.T, signer, state string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "kubelet_podcertificate_states" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["signer_name"] == signer && labels["state"] == state {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func (f *fixture) wantMetric(t *testing.T, signer, state string, want float64) {
	t.Helper()
	if got := f.metric(t, signer, state); got != want {
		t.Errorf("kubelet_podcertificate_states{signer_name=%q,state=%q} = %v, want %v", signer, state, got, want)
	}
}

// wantEvents checks the next events recorded, in order.
func (f *fixture) wantEvents(t *testing.T, want ...string) {
	t.Helper()
	for _, w := range want {
		select {
		case got := <-f.events.Events:
			if got != w {
				t.Errorf("event %q, want %q", got, w)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("no event %q", w)
		}
	}
}

// eventually polls cond every 50ms until it holds, failing the test at ctx's end.
func eventually(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
