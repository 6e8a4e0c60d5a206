package pullmanager

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
)

// The files are upstream's: the name is sha256-<hex of the key>, the content
// compact JSON of the v1beta1 type with a newline, mode 0600 in 0700
// directories.
func TestStoreFormat(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	s, err := newStore(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.writeIntent("docker.io/testing/test:latest"); err != nil {
		t.Fatal(err)
	}
	r := &Record{LastUpdatedTime: metav1.NewTime(time.Date(2024, 10, 21, 12, 26, 40, 0, time.UTC)), ImageRef: "testimageref",
		CredentialMapping: map[string]Credentials{"docker.io/testing/test": {KubernetesSecrets: []Secret{
			{UID: "testsecretuid", Namespace: "default", Name: "pull-secret", CredentialHash: "testsecrethash"}}}}}
	if err := s.writeRecord(r); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, key, want string }{
		{"pulling", "docker.io/testing/test:latest", `{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"docker.io/testing/test:latest"}` + "\n"},
		{"pulled", "testimageref", `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":"2024-10-21T12:26:40Z","imageRef":"testimageref","credentialMapping":{"docker.io/testing/test":{"kubernetesSecrets":[{"uid":"testsecretuid","namespace":"default","name":"pull-secret","credentialHash":"testsecrethash"}]}}}` + "\n"},
	} {
		dir := filepath.Join(root, "image_manager", tc.dir)
		path := filepath.Join(dir, fmt.Sprintf("sha256-%x", sha256.Sum256([]byte(tc.key))))
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.dir, got, tc.want)
		}
		for p, mode := range map[string]os.FileMode{path: 0o600, dir: 0o700 | os.ModeDir} {
			if st, err := os.Stat(p); err != nil || st.Mode() != mode {
				t.Errorf("%s: mode %v (%v), want %v", p, st.Mode(), err, mode)
			}
		}
	}
	if ok, err := s.intentExists("docker.io/testing/test:latest"); !ok || err != nil {
		t.Errorf("intentExists = %v, %v", ok, err)
	}
	back, err := s.record("testimageref")
	if err != nil || back == nil || back.CredentialMapping["docker.io/testing/test"].KubernetesSecrets[0].CredentialHash != "testsecrethash" {
		t.Errorf("record = %+v, %v", back, err)
	}
}

// v1alpha1 files (an older kubelet's) are rewritten as v1beta1; a file with
// an unknown field or of another kind is an error naming it and is left
// alone; .tmp files and foreign names are ignored.
func TestStoreMigrationAndStrictDecoding(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	pulled := filepath.Join(root, "image_manager", "pulled")
	pulling := filepath.Join(root, "image_manager", "pulling")
	for _, d := range []string{pulled, pulling} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(dir, key, content string) string {
		p := filepath.Join(dir, fileName(key))
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write(pulled, "testimage-anonpull-alpha", `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1alpha1","lastUpdatedTime":"2025-06-21T12:26:40Z","imageRef":"testimage-anonpull-alpha","credentialMapping":{"docker.io/testing/test":{"nodePodsAccessible":true}}}`)
	write(pulling, "repo.repo/test/alphatest:v1", `{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1alpha1","image":"repo.repo/test/alphatest:v1"}`)
	bad := write(pulled, "unknown-field", `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":"2024-10-21T12:26:40Z","imageRef":"unknown-field","extra":1}`)
	wrongKind := write(pulled, "wrong-kind", `{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"x"}`)
	if err := os.WriteFile(filepath.Join(pulled, fileName("x")+".tmp"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pulled, "README"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := newStore(root)
	if err != nil {
		t.Fatal(err)
	}
	err = s.migrate()
	if err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), wrongKind) || strings.Contains(err.Error(), ".tmp") {
		t.Fatalf("migrate error = %v, want the two bad files named", err)
	}
	got, _ := os.ReadFile(filepath.Join(pulled, fileName("testimage-anonpull-alpha")))
	if want := `{"kind":"ImagePulledRecord","apiVersion":"kubelet.config.k8s.io/v1beta1","lastUpdatedTime":"2025-06-21T12:26:40Z","imageRef":"testimage-anonpull-alpha","credentialMapping":{"docker.io/testing/test":{"nodePodsAccessible":true}}}` + "\n"; string(got) != want {
		t.Errorf("migrated record:\n got %s\nwant %s", got, want)
	}
	got, _ = os.ReadFile(filepath.Join(pulling, fileName("repo.repo/test/alphatest:v1")))
	if want := `{"kind":"ImagePullIntent","apiVersion":"kubelet.config.k8s.io/v1beta1","image":"repo.repo/test/alphatest:v1"}` + "\n"; string(got) != want {
		t.Errorf("migrated intent:\n got %s\nwant %s", got, want)
	}
	if _, err := s.record("unknown-field"); err == nil || !strings.Contains(err.Error(), `unknown field "extra"`) {
		t.Errorf("record with an unknown field: %v", err)
	}
	if n, err := count(pulled); err != nil || n != 3 {
		t.Errorf("count(pulled) = %d, %v; want 3 (no .tmp, no foreign file)", n, err)
	}
}

// intentExists says whether image has an intent file.
func (s *store) intentExists(image string) (bool, error) {
	data, err := os.ReadFile(filepath.Join(s.pullingDir, fileName(image)))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	var intent kubeletv1beta1.ImagePullIntent
	if _, err := decode(data, intentKind, &intent); err != nil {
		return false, err
	}
	return intent.Image == image, nil
}
