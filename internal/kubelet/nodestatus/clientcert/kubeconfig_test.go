package clientcert

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/testca"
)

func TestCheckKubeconfig(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "test-ca")
	now := time.Now()
	validCert, validKey := ca.IssueClient(t, "system:node:n1", []string{"system:nodes"}, now.Add(-time.Hour), now.Add(time.Hour))
	expiredCert, expiredKey := ca.IssueClient(t, "system:node:n1", []string{"system:nodes"}, now.Add(-2*time.Hour), now.Add(-time.Hour))
	_, otherKey := ca.IssueClient(t, "other", nil, now.Add(-time.Hour), now.Add(time.Hour))

	// fileKubeconfig writes cert and key files and a kubeconfig naming them.
	fileKubeconfig := func(certPEM, keyPEM []byte) func(t *testing.T, dir string) {
		return func(t *testing.T, dir string) {
			cert := writeFile(t, dir, "client.crt", certPEM)
			key := writeFile(t, dir, "client.key", keyPEM)
			if err := clientcmd.WriteToFile(certKubeconfig("https://127.0.0.1:1", ca.CertPEM, cert, key), filepath.Join(dir, "kubeconfig")); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		desc    string
		setup   func(t *testing.T, dir string)
		want    kubeconfigState
		wantErr string
	}{
		{desc: "missing file", setup: func(*testing.T, string) {}, want: kubeconfigMissing, wantErr: "no such file"},
		{
			desc:  "not a kubeconfig",
			setup: func(t *testing.T, dir string) { writeFile(t, dir, "kubeconfig", []byte("{{{ not yaml")) },
			want:  kubeconfigBroken, wantErr: "loading kubeconfig",
		},
		{
			desc:  "empty kubeconfig",
			setup: func(t *testing.T, dir string) { writeFile(t, dir, "kubeconfig", nil) },
			want:  kubeconfigBroken, wantErr: "kubeconfig",
		},
		{desc: "valid certificate files", setup: fileKubeconfig(validCert, validKey), want: kubeconfigValid},
		{
			desc: "valid inline certificate",
			setup: func(t *testing.T, dir string) {
				cfg := certKubeconfig("https://127.0.0.1:1", ca.CertPEM, "", "")
				cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: validCert, ClientKeyData: validKey}
				if err := clientcmd.WriteToFile(cfg, filepath.Join(dir, "kubeconfig")); err != nil {
					t.Fatal(err)
				}
			},
			want: kubeconfigValid,
		},
		{desc: "expired certificate", setup: fileKubeconfig(expiredCert, expiredKey), want: kubeconfigExpired, wantErr: `"system:node:n1" expired at`},
		{desc: "garbage certificate", setup: fileKubeconfig([]byte("garbage"), validKey), want: kubeconfigBroken, wantErr: "client certificate and key"},
		{desc: "key of another certificate", setup: fileKubeconfig(validCert, otherKey), want: kubeconfigBroken, wantErr: "private key does not match"},
		{
			desc: "certificate file missing",
			setup: func(t *testing.T, dir string) {
				fileKubeconfig(validCert, validKey)(t, dir)
				if err := os.Remove(filepath.Join(dir, "client.crt")); err != nil {
					t.Fatal(err)
				}
			},
			want: kubeconfigBroken, wantErr: "client.crt",
		},
		{
			desc: "token instead of certificate",
			setup: func(t *testing.T, dir string) {
				cfg := certKubeconfig("https://127.0.0.1:1", ca.CertPEM, "", "")
				cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "abc.def"}
				if err := clientcmd.WriteToFile(cfg, filepath.Join(dir, "kubeconfig")); err != nil {
					t.Fatal(err)
				}
			},
			want: kubeconfigNoCert, wantErr: "no client certificate",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tc.setup(t, dir)
			got, err := checkKubeconfig(filepath.Join(dir, "kubeconfig"), now)
			if got != tc.want {
				t.Fatalf("state = %v (%v), want %v", got, err, tc.want)
			}
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("error = %v, want none", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestWriteNodeKubeconfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		desc      string
		bootstrap *rest.Config
		existing  bool // a kubeconfig with mode 0644 is there already
		wantCA    string
		wantData  string
	}{
		{
			desc:      "CA file",
			bootstrap: &rest.Config{Host: "https://127.0.0.1:6443", TLSClientConfig: rest.TLSClientConfig{CAFile: "/etc/kubernetes/pki/ca.crt", CAData: []byte("ignored")}},
			wantCA:    "/etc/kubernetes/pki/ca.crt",
		},
		{
			desc:      "inline CA over an existing file",
			bootstrap: &rest.Config{Host: "https://10.0.0.1:443", TLSClientConfig: rest.TLSClientConfig{CAData: []byte("CA PEM"), ServerName: "kubernetes"}},
			existing:  true,
			wantData:  "CA PEM",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "etc", "kubelet.conf")
			if tc.existing {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Dir(path), "kubelet.conf", []byte("old"))
				if err := os.Chmod(path, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			pemPath := filepath.Join(dir, "pki", "kubelet-client-current.pem")
			if err := writeKubeconfig(path, nodeKubeconfig(tc.bootstrap, pemPath)); err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("mode = %v, want 0600", st.Mode().Perm())
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			if len(entries) != 1 {
				t.Errorf("directory holds %d entries, want only the kubeconfig (no temporary file left)", len(entries))
			}
			kc, err := clientcmd.LoadFromFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ctx := kc.Contexts[kc.CurrentContext]
			if ctx == nil {
				t.Fatalf("current context %q missing", kc.CurrentContext)
			}
			cluster, auth := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
			if cluster.Server != tc.bootstrap.Host || cluster.TLSServerName != tc.bootstrap.ServerName {
				t.Errorf("cluster = %s (server name %q), want %s (%q)", cluster.Server, cluster.TLSServerName, tc.bootstrap.Host, tc.bootstrap.ServerName)
			}
			if cluster.CertificateAuthority != tc.wantCA || string(cluster.CertificateAuthorityData) != tc.wantData {
				t.Errorf("CA = %q / %q, want %q / %q", cluster.CertificateAuthority, cluster.CertificateAuthorityData, tc.wantCA, tc.wantData)
			}
			if auth.ClientCertificate != pemPath || auth.ClientKey != pemPath {
				t.Errorf("client certificate/key = %q/%q, want both %q", auth.ClientCertificate, auth.ClientKey, pemPath)
			}
			if auth.Token != "" || len(auth.ClientCertificateData) != 0 {
				t.Errorf("unexpected credentials in %+v", auth)
			}
		})
	}
}

func TestBootstrapWithoutBootstrapKubeconfig(t *testing.T) {
	t.Parallel()
	ca := testca.New(t, "test-ca")
	now := time.Now()
	tests := []struct {
		desc    string
		setup   func(t *testing.T, dir string) string // returns --kubeconfig
		wantErr []string                              // substrings; none = success
	}{
		{
			desc:    "no --kubeconfig",
			setup:   func(*testing.T, string) string { return "" },
			wantErr: []string{"no --kubeconfig"},
		},
		{
			desc:    "kubeconfig missing",
			setup:   func(_ *testing.T, dir string) string { return filepath.Join(dir, "kubelet.conf") },
			wantErr: []string{"--kubeconfig", "kubelet.conf does not exist", "--bootstrap-kubeconfig"},
		},
		{
			desc: "expired certificate",
			setup: func(t *testing.T, dir string) string {
				c, k := ca.IssueClient(t, "system:node:n1", nil, now.Add(-2*time.Hour), now.Add(-time.Hour))
				return writeKubeconfigFile(t, dir, certKubeconfig("https://127.0.0.1:1", ca.CertPEM, writeFile(t, dir, "c.crt", c), writeFile(t, dir, "c.key", k)))
			},
			wantErr: []string{"is not usable", "--bootstrap-kubeconfig", "expired at"},
		},
		{
			desc:    "garbage kubeconfig",
			setup:   func(t *testing.T, dir string) string { return writeFile(t, dir, "kubelet.conf", []byte("{{{")) },
			wantErr: []string{"is not usable", "--bootstrap-kubeconfig"},
		},
		{
			desc: "valid certificate",
			setup: func(t *testing.T, dir string) string {
				c, k := ca.IssueClient(t, "system:node:n1", nil, now.Add(-time.Hour), now.Add(time.Hour))
				return writeKubeconfigFile(t, dir, certKubeconfig("https://127.0.0.1:1", ca.CertPEM, writeFile(t, dir, "c.crt", c), writeFile(t, dir, "c.key", k)))
			},
		},
		{
			desc: "token kubeconfig",
			setup: func(t *testing.T, dir string) string {
				cfg := certKubeconfig("https://127.0.0.1:1", ca.CertPEM, "", "")
				cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "abc.def"}
				return writeKubeconfigFile(t, dir, cfg)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			opts := Options{KubeconfigPath: tc.setup(t, dir), CertDir: filepath.Join(dir, "pki"), NodeName: "n1", Logger: zaptest.NewLogger(t)}
			err := Bootstrap(context.Background(), opts)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Bootstrap: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Bootstrap succeeded, want an error with %q", tc.wantErr)
			}
			for _, s := range tc.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
			if _, err := os.Stat(opts.CertDir); err == nil {
				t.Errorf("Bootstrap created %s although it had nothing to bootstrap with", opts.CertDir)
			}
		})
	}
}

func TestBootstrapNeedsNodeAndCertDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{
		KubeconfigPath:          filepath.Join(dir, "kubelet.conf"),
		BootstrapKubeconfigPath: filepath.Join(dir, "bootstrap.conf"),
	}
	err := Bootstrap(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "no node name") || !strings.Contains(err.Error(), "no certificate directory") {
		t.Fatalf("Bootstrap = %v, want errors naming the node name and the certificate directory", err)
	}
}

func TestBootstrapBadBootstrapKubeconfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{
		KubeconfigPath:          filepath.Join(dir, "kubelet.conf"),
		BootstrapKubeconfigPath: filepath.Join(dir, "bootstrap.conf"),
		CertDir:                 filepath.Join(dir, "pki"),
		NodeName:                "n1",
	}
	err := Bootstrap(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "--bootstrap-kubeconfig") || !strings.Contains(err.Error(), "bootstrap.conf") {
		t.Fatalf("Bootstrap = %v, want an error naming the bootstrap kubeconfig", err)
	}
}

// writeKubeconfigFile writes cfg to dir/kubelet.conf and returns the path.
func writeKubeconfigFile(t *testing.T, dir string, cfg clientcmdapi.Config) string {
	t.Helper()
	path := filepath.Join(dir, "kubelet.conf")
	if err := clientcmd.WriteToFile(cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
