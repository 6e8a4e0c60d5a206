package pullmanager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

func newTestManager(t *testing.T, policy kubeletv1beta1.ImagePullCredentialsVerificationPolicy, allowlist []string, images ImageLister, root string) (*Manager, *prometheus.Registry) {
	t.Helper()
	p, err := NewPolicy(policy, allowlist)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	met, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	if root == "" {
		root = t.TempDir()
	}
	m, err := New(context.Background(), Options{RootDirectory: root, Policy: p, Images: images, Metrics: met, MaxPods: 10})
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func podCreds(secrets []Secret, sa *ServiceAccount) PodCredentials {
	return func() ([]Secret, *ServiceAccount, error) { return secrets, sa, nil }
}

var (
	secretA      = Secret{UID: "uid-a", Namespace: "team-a", Name: "pull", CredentialHash: "hash-a"}
	secretAOther = Secret{UID: "uid-a2", Namespace: "team-b", Name: "copy", CredentialHash: "hash-a"}
	secretARot   = Secret{UID: "uid-a", Namespace: "team-a", Name: "pull", CredentialHash: "hash-rotated"}
	secretB      = Secret{UID: "uid-b", Namespace: "team-b", Name: "pull", CredentialHash: "hash-b"}
	accountA     = ServiceAccount{UID: "sa-uid", Namespace: "team-a", Name: "puller"}
)

// MustAttemptImagePull as upstream's: the pull records and the policy decide
// whether a pod must show its own credentials for an image on the node.
func TestMustAttemptImagePull(t *testing.T) {
	t.Parallel()
	const image, ref = "registry.example.com/app:1", "sha256:app"
	for _, tc := range []struct {
		desc      string
		policy    kubeletv1beta1.ImagePullCredentialsVerificationPolicy
		allowlist []string
		pulled    *Credentials // recorded pull of image; nil: none (preloaded)
		intent    bool         // an intent of image left on disk
		secrets   []Secret
		account   *ServiceAccount
		want      bool
		result    string
	}{
		{desc: "preloaded image, default policy", want: false, result: checkPolicyAllowed},
		{desc: "preloaded image, AlwaysVerify", policy: kubeletv1beta1.AlwaysVerify, want: true, result: checkMustAuthenticate},
		{desc: "preloaded image with an intent left: pulled by the kubelet", intent: true, want: true, result: checkMustAuthenticate},
		{desc: "pulled with a secret, NeverVerify", policy: kubeletv1beta1.NeverVerify, pulled: &Credentials{KubernetesSecrets: []Secret{secretA}}, want: false, result: checkPolicyAllowed},
		{desc: "pulled with a secret, pod without", pulled: &Credentials{KubernetesSecrets: []Secret{secretA}}, want: true, result: checkMustAuthenticate},
		{desc: "pulled with a secret, pod with another", pulled: &Credentials{KubernetesSecrets: []Secret{secretA}}, secrets: []Secret{secretB}, want: true, result: checkMustAuthenticate},
		{desc: "pulled with a secret, pod with it", pulled: &Credentials{KubernetesSecrets: []Secret{secretA}}, secrets: []Secret{secretA}, want: false, result: checkRecordFound},
		{desc: "same credentials in another secret", pulled: &Credentials{KubernetesSecrets: []Secret{secretA}}, secrets: []Secret{secretB, secretAOther}, want: false, result: checkRecordFound},
		{desc: "same secret, rotated", pulled: &Credentials{KubernetesSecrets: []Secret{secretA}}, secrets: []Secret{secretARot}, want: false, result: checkRecordFound},
		{desc: "pulled anonymously or with the node's credentials", pulled: &Credentials{NodePodsAccessible: true}, want: false, result: checkRecordFound},
		{desc: "pulled through the pod's service account", pulled: &Credentials{KubernetesServiceAccounts: []ServiceAccount{accountA}}, account: &accountA, want: false, result: checkRecordFound},
		{desc: "pulled through another service account", pulled: &Credentials{KubernetesServiceAccounts: []ServiceAccount{accountA}},
			account: &ServiceAccount{UID: "x", Namespace: "team-b", Name: "puller"}, want: true, result: checkMustAuthenticate},
		{desc: "allowlisted by prefix", policy: kubeletv1beta1.NeverVerifyAllowlistedImages, allowlist: []string{"registry.example.com/*"},
			pulled: &Credentials{KubernetesSecrets: []Secret{secretA}}, want: false, result: checkPolicyAllowed},
		{desc: "allowlist does not name it, preloaded", policy: kubeletv1beta1.NeverVerifyAllowlistedImages, allowlist: []string{"registry.example.com/other"},
			want: true, result: checkMustAuthenticate},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if tc.intent { // left by an earlier kubelet
				s, err := newStore(root)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.writeIntent(image); err != nil {
					t.Fatal(err)
				}
			}
			m, _ := newTestManager(t, tc.policy, tc.allowlist, nil, root)
			if tc.pulled != nil {
				if err := m.RecordPullIntent(image); err != nil {
					t.Fatal(err)
				}
				m.RecordImagePulled(image, ref, tc.pulled)
			}
			got, err := m.MustAttemptImagePull(image, ref, podCreds(tc.secrets, tc.account))
			if err != nil || got != tc.want {
				t.Fatalf("MustAttemptImagePull = %v, %v; want %v", got, err, tc.want)
			}
			if n := testutil.ToFloat64(m.metrics.mustPullChecks.WithLabelValues(tc.result)); n != 1 {
				t.Errorf("kubelet_imagemanager_image_mustpull_checks_total{result=%q} = %v, want 1", tc.result, n)
			}
		})
	}
}

// A match by hash or by coordinates teaches the record the pod's secret; the
// other pod's secret then matches on its own.
func TestMustAttemptImagePullLearnsSecrets(t *testing.T) {
	t.Parallel()
	m, _ := newTestManager(t, "", nil, nil, "")
	const image, ref = "registry.example.com/app@sha256:0123456789012345678901234567890123456789012345678901234567890123", "sha256:app"
	if err := m.RecordPullIntent(image); err != nil {
		t.Fatal(err)
	}
	m.RecordImagePulled(image, ref, &Credentials{KubernetesSecrets: []Secret{secretA}})
	if must, _ := m.MustAttemptImagePull(image, ref, podCreds([]Secret{secretAOther}, nil)); must {
		t.Fatal("same credentials refused")
	}
	r, err := m.store.record(ref)
	if err != nil || r == nil {
		t.Fatal(r, err)
	}
	want := []Secret{secretA, secretAOther}
	if got := r.CredentialMapping["registry.example.com/app"].KubernetesSecrets; !reflect.DeepEqual(got, want) {
		t.Errorf("secrets = %+v, want %+v", got, want)
	}
	if must, _ := m.MustAttemptImagePull(image, ref, podCreds([]Secret{secretARot}, nil)); must {
		t.Fatal("rotated secret refused")
	}
	r, _ = m.store.record(ref)
	if got := r.CredentialMapping["registry.example.com/app"].KubernetesSecrets[0].CredentialHash; got != "hash-rotated" {
		t.Errorf("rotated hash not recorded: %q", got)
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	base := func(c Credentials) *Record {
		return &Record{ImageRef: "ref", CredentialMapping: map[string]Credentials{"app": c}}
	}
	for _, tc := range []struct {
		desc    string
		orig    *Record
		add     *Credentials
		want    Credentials
		changed bool
	}{
		{"new record without credentials", nil, nil, Credentials{}, true},
		{"node access replaces secrets", base(Credentials{KubernetesSecrets: []Secret{secretA}}), &Credentials{NodePodsAccessible: true}, Credentials{NodePodsAccessible: true}, true},
		{"node access stays", base(Credentials{NodePodsAccessible: true}), &Credentials{KubernetesSecrets: []Secret{secretA}}, Credentials{NodePodsAccessible: true}, false},
		{"secrets sorted by namespace, name, uid", base(Credentials{KubernetesSecrets: []Secret{secretB}}), &Credentials{KubernetesSecrets: []Secret{secretA}},
			Credentials{KubernetesSecrets: []Secret{secretA, secretB}}, true},
		{"same secret, same hash", base(Credentials{KubernetesSecrets: []Secret{secretA}}), &Credentials{KubernetesSecrets: []Secret{secretA}},
			Credentials{KubernetesSecrets: []Secret{secretA}}, false},
		{"service accounts added", base(Credentials{KubernetesSecrets: []Secret{secretA}}), &Credentials{KubernetesServiceAccounts: []ServiceAccount{accountA}},
			Credentials{KubernetesSecrets: []Secret{secretA}, KubernetesServiceAccounts: []ServiceAccount{accountA}}, true},
		{"empty credentials change nothing", base(Credentials{KubernetesSecrets: []Secret{secretA}}), &Credentials{},
			Credentials{KubernetesSecrets: []Secret{secretA}}, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, changed := merge(tc.orig, "ref", "app", tc.add)
			if changed != tc.changed || !reflect.DeepEqual(got.CredentialMapping["app"], tc.want) {
				t.Errorf("merge = %+v, %v; want %+v, %v", got.CredentialMapping["app"], changed, tc.want, tc.changed)
			}
			if tc.orig != nil && changed && reflect.DeepEqual(tc.orig.CredentialMapping["app"], got.CredentialMapping["app"]) {
				t.Error("record changed in place")
			}
		})
	}
}

type fakeImages []Image

func (f fakeImages) ListImages(context.Context) ([]Image, error) { return f, nil }

// Intents a previous kubelet left become records without credentials (the
// kubelet pulled them: a pod must verify) when the image is present; the
// others stay. Two pulls of one image keep the intent until both end.
func TestRecoverAndIntents(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	first, _ := newTestManager(t, "", nil, nil, root)
	for _, img := range []string{"registry.example.com/app:1", "registry.example.com/gone:1"} {
		if err := first.RecordPullIntent(img); err != nil {
			t.Fatal(err)
		}
	}
	m, reg := newTestManager(t, "", nil, fakeImages{{ID: "sha256:app", RepoTags: []string{"registry.example.com/app:1"}}}, root)
	r, err := m.store.record("sha256:app")
	if err != nil || r == nil || len(r.CredentialMapping) != 0 {
		t.Fatalf("recovered record = %+v, %v", r, err)
	}
	if must, _ := m.MustAttemptImagePull("registry.example.com/app:1", "sha256:app", podCreds(nil, nil)); !must {
		t.Error("an image the kubelet pulled with unknown credentials was given without verification")
	}
	if ok, _ := m.store.intentExists("registry.example.com/app:1"); ok {
		t.Error("recovered intent not removed")
	}
	if ok, _ := m.store.intentExists("registry.example.com/gone:1"); !ok {
		t.Error("intent of an absent image removed")
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kubelet_imagemanager_ondisk_pulledrecords [ALPHA] Number of ImagePulledRecords stored on disk.
# TYPE kubelet_imagemanager_ondisk_pulledrecords gauge
kubelet_imagemanager_ondisk_pulledrecords 1
# HELP kubelet_imagemanager_ondisk_pullintents [ALPHA] Number of ImagePullIntents stored on disk.
# TYPE kubelet_imagemanager_ondisk_pullintents gauge
kubelet_imagemanager_ondisk_pullintents 1
`), "kubelet_imagemanager_ondisk_pulledrecords", "kubelet_imagemanager_ondisk_pullintents"); err != nil {
		t.Error(err)
	}

	const img = "registry.example.com/two:1"
	_ = m.RecordPullIntent(img)
	_ = m.RecordPullIntent(img)
	m.RecordImagePullFailed(img)
	if ok, _ := m.store.intentExists(img); !ok {
		t.Error("intent removed while a pull of it is in flight")
	}
	m.RecordImagePulled(img, "sha256:two", nil)
	if ok, _ := m.store.intentExists(img); ok {
		t.Error("intent kept after the last pull")
	}
	if r, _ := m.store.record("sha256:two"); r == nil || !r.CredentialMapping["registry.example.com/two"].NodePodsAccessible {
		t.Errorf("pull without credentials: record %+v", r)
	}
}

// The image GC's hook removes the records of images gone and older than
// the collection; the others stay.
func TestPruneUnknownRecords(t *testing.T) {
	t.Parallel()
	m, _ := newTestManager(t, "", nil, nil, "")
	for _, ref := range []string{"sha256:kept", "sha256:gone"} {
		m.RecordImagePulled("app:"+strings.TrimPrefix(ref, "sha256:"), ref, nil)
	}
	m.PruneUnknownRecords([]string{"sha256:kept"}, time.Now().Add(-time.Hour))
	if r, _ := m.store.record("sha256:gone"); r == nil {
		t.Error("record newer than the collection removed")
	}
	m.PruneUnknownRecords([]string{"sha256:kept"}, time.Now().Add(time.Hour))
	if r, _ := m.store.record("sha256:gone"); r != nil {
		t.Error("record of a removed image kept")
	}
	if r, _ := m.store.record("sha256:kept"); r == nil {
		t.Error("record of a present image removed")
	}
	if _, err := os.Stat(filepath.Join(m.store.pulledDir, fileName("sha256:gone"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("file of the pruned record: %v", err)
	}
}

func TestAllowlistValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ pattern, err string }{
		{"registry.example.com/*", ""},
		{"registry.example.com/team/app", ""},
		{" registry.example.com/app", "leading/trailing spaces are not allowed"},
		{"registry.example.com/app:1", "neither tag nor digest is accepted"},
		{"registry.*.com/app", "only patterns ending with '/*' are allowed"},
		{"/*", "at least registry hostname is required"},
		{"*", "not a valid wildcard pattern"},
		{"Registry/App", "failed to parse as an image name"},
	} {
		err := ValidateAllowlist([]string{tc.pattern})
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: %v, want %q", tc.pattern, err, tc.err)
		}
	}
}

// BenchmarkMustAttemptImagePull is the cost the records add to a container
// start whose image is present: a preloaded image (no record: two absent
// files), and one pulled with a secret the pod has (cached record).
func BenchmarkMustAttemptImagePull(b *testing.B) {
	p, _ := NewPolicy("", nil)
	m, err := New(context.Background(), Options{RootDirectory: b.TempDir(), Policy: p})
	if err != nil {
		b.Fatal(err)
	}
	m.RecordImagePulled("registry.example.com/app:1", "sha256:app", &Credentials{KubernetesSecrets: []Secret{secretA}})
	creds := podCreds([]Secret{secretA}, nil)
	b.Run("preloaded", func(b *testing.B) {
		for range b.N {
			if must, _ := m.MustAttemptImagePull("busybox:1.36", "sha256:busybox", creds); must {
				b.Fatal("preloaded image must be pulled")
			}
		}
	})
	b.Run("recorded", func(b *testing.B) {
		for range b.N {
			if must, _ := m.MustAttemptImagePull("registry.example.com/app:1", "sha256:app", creds); must {
				b.Fatal("recorded image must be pulled")
			}
		}
	})
}
