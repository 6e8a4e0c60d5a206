package credentialprovider

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	configv1 "k8s.io/kubelet/config/v1"
)

const validV1Config = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
- name: test-plugin
  matchImages: ["*.example.com", "registry.example.com:5000/team"]
  defaultCacheDuration: 10m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
  args: ["--verbose"]
  env:
  - name: FOO
    value: bar
`

func TestReadPluginConfig(t *testing.T) {
	t.Parallel()
	dec, err := newConfigDecoder()
	if err != nil {
		t.Fatal(err)
	}
	provider := func(name, api string) configv1.CredentialProvider {
		return configv1.CredentialProvider{
			Name: name, MatchImages: []string{"*.example.com"}, APIVersion: api,
			DefaultCacheDuration: &metav1.Duration{Duration: time.Minute},
		}
	}
	oneProvider := func(name, configAPI, pluginAPI string) string {
		return "apiVersion: " + configAPI + `
kind: CredentialProviderConfig
providers:
- name: ` + name + `
  matchImages: ["*.example.com"]
  defaultCacheDuration: 1m
  apiVersion: ` + pluginAPI + "\n"
	}
	for _, test := range []struct {
		desc    string
		files   map[string]string // "" is the config file itself, else files of a config dir
		want    []configv1.CredentialProvider
		wantErr string
	}{
		{
			desc:  "v1 yaml",
			files: map[string]string{"": validV1Config},
			want: []configv1.CredentialProvider{{
				Name: "test-plugin", MatchImages: []string{"*.example.com", "registry.example.com:5000/team"},
				DefaultCacheDuration: &metav1.Duration{Duration: 10 * time.Minute}, APIVersion: "credentialprovider.kubelet.k8s.io/v1",
				Args: []string{"--verbose"}, Env: []configv1.ExecEnvVar{{Name: "FOO", Value: "bar"}},
			}},
		},
		{
			desc: "json",
			files: map[string]string{"": `{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[
				{"name":"a","matchImages":["*.example.com"],"defaultCacheDuration":"1m","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}]}`},
			want: []configv1.CredentialProvider{provider("a", "credentialprovider.kubelet.k8s.io/v1")},
		},
		{
			desc:  "v1beta1 and v1alpha1",
			files: map[string]string{"b.yaml": oneProvider("b", "kubelet.config.k8s.io/v1beta1", "credentialprovider.kubelet.k8s.io/v1beta1"), "a.yml": oneProvider("a", "kubelet.config.k8s.io/v1alpha1", "credentialprovider.kubelet.k8s.io/v1alpha1")},
			want:  []configv1.CredentialProvider{provider("a", "credentialprovider.kubelet.k8s.io/v1alpha1"), provider("b", "credentialprovider.kubelet.k8s.io/v1beta1")},
		},
		{
			desc: "directory in lexical order, other files ignored",
			files: map[string]string{
				"20-b.json": oneProvider("b", "kubelet.config.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1"),
				"10-a.yaml": oneProvider("a", "kubelet.config.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1"),
				"30-c.txt":  "not a config",
				"README":    "not a config",
			},
			want: []configv1.CredentialProvider{provider("a", "credentialprovider.kubelet.k8s.io/v1"), provider("b", "credentialprovider.kubelet.k8s.io/v1")},
		},
		{
			desc:    "directory without configs",
			files:   map[string]string{"notes.txt": "x"},
			wantErr: "no configuration files found in directory",
		},
		{
			desc: "duplicate names across files",
			files: map[string]string{
				"a.yaml": oneProvider("dup", "kubelet.config.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1"),
				"b.yaml": oneProvider("dup", "kubelet.config.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1"),
			},
			wantErr: `duplicate provider name "dup" found in configuration file(s)`,
		},
		{
			desc:    "unknown field",
			files:   map[string]string{"": strings.Replace(validV1Config, "  args:", "  unknownField: 1\n  args:", 1)},
			wantErr: `strict decoding error: unknown field "providers[0].unknownField"`,
		},
		{
			desc:    "tokenAttributes in v1beta1",
			files:   map[string]string{"": oneProvider("a", "kubelet.config.k8s.io/v1beta1", "credentialprovider.kubelet.k8s.io/v1") + "  tokenAttributes: {}\n"},
			wantErr: `strict decoding error: unknown field "providers[0].tokenAttributes"`,
		},
		{
			desc:    "wrong kind",
			files:   map[string]string{"": strings.Replace(validV1Config, "kind: CredentialProviderConfig", "kind: WrongKind", 1)},
			wantErr: `no kind "WrongKind" is registered for version "kubelet.config.k8s.io/v1"`,
		},
		{
			desc:    "wrong group",
			files:   map[string]string{"": strings.Replace(validV1Config, "kubelet.config.k8s.io/v1", "foobar/v1", 1)},
			wantErr: `no kind "CredentialProviderConfig" is registered for version "foobar/v1"`,
		},
		{
			desc:    "another kubelet.config.k8s.io kind",
			files:   map[string]string{"": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"},
			wantErr: `failed to decode "KubeletConfiguration" (wrong Kind)`,
		},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := dir
			for name, data := range test.files {
				if name == "" {
					path = filepath.Join(dir, "config.yaml")
					name = "config.yaml"
				}
				writeFile(t, filepath.Join(dir, name), data)
			}
			cfg, err := readPluginConfig(path, dec)
			if test.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), test.wantErr) {
					t.Fatalf("readPluginConfig error = %v, want one containing %q", err, test.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Providers, test.want) {
				t.Errorf("providers = %+v\nwant %+v", cfg.Providers, test.want)
			}
		})
	}
}

func TestNewPluginsErrors(t *testing.T) {
	t.Parallel()
	withProvider := func(fields string) string {
		return "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n- " + fields
	}
	const ok = `matchImages: ["*.example.com"]
  defaultCacheDuration: 1m
  apiVersion: credentialprovider.kubelet.k8s.io/v1
`
	for _, test := range []struct {
		desc    string
		config  string // "" for no config file
		binDir  string // default testBinDir
		wantErr string
	}{
		{desc: "missing bin dir", config: validV1Config, binDir: "/nonexistent/bin", wantErr: "plugin binary directory /nonexistent/bin did not exist"},
		{desc: "empty config path", wantErr: "credential provider config path is empty"},
		{desc: "no providers", config: "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders: []\n",
			wantErr: "failed to validate credential provider config: providers: Required value: at least 1 item in plugins is required"},
		{desc: "no matchImages", config: withProvider("name: test-plugin\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"),
			wantErr: "providers.matchImages: Required value: at least 1 item in matchImages is required"},
		{desc: "no defaultCacheDuration", config: withProvider("name: test-plugin\n  matchImages: [a.example.com]\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"),
			wantErr: "providers.defaultCacheDuration: Required value"},
		{desc: "negative defaultCacheDuration", config: withProvider("name: test-plugin\n  matchImages: [a.example.com]\n  defaultCacheDuration: -1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"),
			wantErr: `providers.defaultCacheDuration: Invalid value: "-1m0s": must be greater than or equal to 0`},
		{desc: "no apiVersion", config: withProvider("name: test-plugin\n  matchImages: [a.example.com]\n  defaultCacheDuration: 1m\n"),
			wantErr: "providers.apiVersion: Required value"},
		{desc: "unknown apiVersion", config: withProvider("name: test-plugin\n  matchImages: [a.example.com]\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v2\n"),
			wantErr: `providers.apiVersion: Unsupported value: "credentialprovider.kubelet.k8s.io/v2": supported values: "credentialprovider.kubelet.k8s.io/v1", "credentialprovider.kubelet.k8s.io/v1alpha1", "credentialprovider.kubelet.k8s.io/v1beta1"`},
		{desc: "name with slash", config: withProvider("name: foo/../bar\n  " + ok), wantErr: `providers.name: Invalid value: "foo/../bar": provider name cannot contain '/'`},
		{desc: "name with space", config: withProvider("name: foo bar\n  " + ok), wantErr: `providers.name: Invalid value: "foo bar": provider name cannot contain spaces`},
		{desc: "name dot", config: withProvider("name: .\n  " + ok), wantErr: `providers.name: Invalid value: ".": provider name cannot be '.'`},
		{desc: "name dot dot", config: withProvider(`name: ".."` + "\n  " + ok), wantErr: `providers.name: Invalid value: "..": provider name cannot be '..'`},
		{desc: "bad matchImages", config: withProvider("name: test-plugin\n  matchImages: [\"%zz\"]\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1\n"),
			wantErr: `providers.matchImages: Invalid value: "%zz": match image is invalid: parse "https://%zz": invalid URL escape "%zz"`},
		{desc: "tokenAttributes incomplete", config: withProvider("name: test-plugin\n  " + ok + "  tokenAttributes: {}\n"),
			wantErr: "[providers.tokenAttributes.serviceAccountTokenAudience: Required value, providers.tokenAttributes.requireServiceAccount: Required value, providers.tokenAttributes.cacheType: Required value: cacheType is required to be set when tokenAttributes is specified. Supported values are: ServiceAccount, Token]"},
		{desc: "tokenAttributes bad cacheType and keys", config: withProvider("name: test-plugin\n  " + ok +
			"  tokenAttributes: {serviceAccountTokenAudience: aud, requireServiceAccount: false, cacheType: Pod, requiredServiceAccountAnnotationKeys: [a.io/x], optionalServiceAccountAnnotationKeys: [a.io/x, \"bad key\"]}\n"),
			wantErr: "providers.tokenAttributes.requiredServiceAccountAnnotationKeys: Forbidden: requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set"},
		{desc: "tokenAttributes with v1beta1 plugin", config: withProvider("name: test-plugin\n  matchImages: [a.example.com]\n  defaultCacheDuration: 1m\n  apiVersion: credentialprovider.kubelet.k8s.io/v1beta1\n" +
			"  tokenAttributes: {serviceAccountTokenAudience: aud, requireServiceAccount: true, cacheType: Token}\n"),
			wantErr: "providers.tokenAttributes: Forbidden: tokenAttributes is only supported for credentialprovider.kubelet.k8s.io/v1 API version"},
		{desc: "binary missing", config: withProvider("name: absent-plugin\n  " + ok), wantErr: "plugin binary executable " + filepath.Join("BIN", "absent-plugin") + " did not exist"},
		{desc: "binary not executable", config: withProvider("name: not-executable\n  " + ok), wantErr: "error inspecting binary executable " + filepath.Join("BIN", "not-executable") + ": "},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			path := ""
			if test.config != "" {
				path = filepath.Join(t.TempDir(), "config.yaml")
				writeFile(t, path, test.config)
			}
			binDir := test.binDir
			if binDir == "" {
				binDir = testBinDir
			}
			_, err := NewPlugins(path, binDir)
			wantErr := strings.ReplaceAll(test.wantErr, "BIN", testBinDir)
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("NewPlugins error = %v\nwant one containing %q", err, wantErr)
			}
		})
	}
}

func TestValidateTokenAttributesAllErrors(t *testing.T) {
	t.Parallel()
	no := false
	cfg := &configv1.CredentialProviderConfig{Providers: []configv1.CredentialProvider{{
		Name: "p", MatchImages: []string{"a.example.com"}, DefaultCacheDuration: &metav1.Duration{},
		APIVersion: "credentialprovider.kubelet.k8s.io/v1",
		TokenAttributes: &configv1.ServiceAccountTokenAttributes{
			ServiceAccountTokenAudience: "aud", RequireServiceAccount: &no, CacheType: "Pod",
			RequiredServiceAccountAnnotationKeys: []string{"a.io/x"},
			OptionalServiceAccountAnnotationKeys: []string{"a.io/x", "bad key", "bad key"},
		},
	}}}
	got := validatePluginConfig(cfg, true).ToAggregate().Error()
	for _, want := range []string{
		"providers.tokenAttributes.requiredServiceAccountAnnotationKeys: Forbidden: requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set",
		`providers.tokenAttributes.optionalServiceAccountAnnotationKeys: Invalid value: "bad key": name part must consist of alphanumeric characters`,
		`providers.tokenAttributes.optionalServiceAccountAnnotationKeys: Duplicate value: "bad key"`,
		`providers.tokenAttributes: Invalid value: ["a.io/x"]: annotation keys cannot be both required and optional`,
		`providers.tokenAttributes.cacheType: Unsupported value: "Pod": supported values: "ServiceAccount", "Token"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %q\nlack %q", got, want)
		}
	}
}
