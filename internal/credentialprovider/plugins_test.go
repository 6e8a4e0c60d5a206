package credentialprovider

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	clocktesting "k8s.io/utils/clock/testing"
)

// testProvider is one provider of a test config.
type testProvider struct {
	name         string // a binary of testBinDir; default test-plugin
	apiVersion   string // default credentialprovider.kubelet.k8s.io/v1
	matchImages  []string
	defaultCache string // default 0s
	extra        string // more YAML fields of the provider
	response     string // what the plugin prints
}

// pluginEnv is one test's plugin: where its runs and last request land.
type pluginEnv struct {
	plugins *Plugins
	clock   *clocktesting.FakeClock
	logs    *observer.ObservedLogs
	dir     string
}

func (e *pluginEnv) runs(t *testing.T, provider string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.dir, provider+".runs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func (e *pluginEnv) request(t *testing.T, provider string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.dir, provider+".request"))
	if err != nil {
		t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatalf("request %q: %v", data, err)
	}
	return req
}

func newPluginEnv(t *testing.T, providers ...testProvider) *pluginEnv {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n")
	for _, p := range providers {
		if p.name == "" {
			p.name = "test-plugin"
		}
		if p.apiVersion == "" {
			p.apiVersion = "credentialprovider.kubelet.k8s.io/v1"
		}
		if p.defaultCache == "" {
			p.defaultCache = "0s"
		}
		writeFile(t, filepath.Join(dir, p.name+".response"), p.response)
		matches, _ := json.Marshal(p.matchImages)
		fmt.Fprintf(&cfg, "- name: %s\n  apiVersion: %s\n  matchImages: %s\n  defaultCacheDuration: %s\n", p.name, p.apiVersion, matches, p.defaultCache)
		fmt.Fprintf(&cfg, "  args: [--registry-region, test]\n  env:\n")
		for name, file := range map[string]string{"REQUEST_FILE": ".request", "RUNS_FILE": ".runs", "RESPONSE_FILE": ".response"} {
			fmt.Fprintf(&cfg, "  - {name: %s, value: %q}\n", name, filepath.Join(dir, p.name+file))
		}
		cfg.WriteString(p.extra)
	}
	configPath := filepath.Join(dir, "config.yaml")
	writeFile(t, configPath, cfg.String())

	core, logs := observer.New(zapcore.DebugLevel)
	clock := clocktesting.NewFakeClock(time.Now())
	plugins, err := NewPlugins(configPath, testBinDir, WithLogger(zap.New(core)), func(o *pluginsOptions) {
		o.clock = clock
		o.environ = func() []string {
			return []string{"PATH=" + os.Getenv("PATH"), "PLUGIN_GREETING=from-kubelet", "RUNS_FILE=/dev/null"}
		}
	})
	if err != nil {
		t.Fatalf("NewPlugins: %v\nconfig:\n%s", err, cfg.String())
	}
	return &pluginEnv{plugins: plugins, clock: clock, logs: logs, dir: dir}
}

// response builds a v1 plugin response.
func response(cacheKeyType, cacheDuration string, auth map[string]string) string {
	r := map[string]any{
		"apiVersion":   "credentialprovider.kubelet.k8s.io/v1",
		"kind":         "CredentialProviderResponse",
		"cacheKeyType": cacheKeyType,
	}
	if cacheDuration != "" {
		r["cacheDuration"] = cacheDuration
	}
	a := map[string]any{}
	for match, userName := range auth {
		a[match] = map[string]string{"username": userName, "password": userName + "-pw"}
	}
	r["auth"] = a
	data, _ := json.Marshal(r)
	return string(data)
}

func TestPluginsProtocol(t *testing.T) {
	t.Parallel()
	env := newPluginEnv(t, testProvider{
		matchImages: []string{"*.example.com"},
		extra:       "  - {name: PLUGIN_GREETING, value: from-config}\n",
		response: response("Image", "", map[string]string{
			"registry.example.com":      "host",
			"registry.example.com/team": "team",
			"other.example.com":         "other",
		}),
	})

	got, ok := env.plugins.Lookup("registry.example.com/team/app")
	if want := []AuthConfig{user("team"), user("host")}; !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("Lookup = %v, %v; want %v", got, ok, want)
	}
	wantRequest := map[string]any{
		"apiVersion": "credentialprovider.kubelet.k8s.io/v1",
		"kind":       "CredentialProviderRequest",
		"image":      "registry.example.com/team/app",
	}
	if req := env.request(t, "test-plugin"); !reflect.DeepEqual(req, wantRequest) {
		t.Errorf("request = %v, want %v", req, wantRequest)
	}
	// The config's env is added to the kubelet's and wins over it.
	if runs, want := env.runs(t, "test-plugin"), []string{"args=--registry-region test greeting=from-config"}; !reflect.DeepEqual(runs, want) {
		t.Errorf("runs = %q, want %q", runs, want)
	}

	// An image outside matchImages does not run the plugin.
	if got, ok := env.plugins.Lookup("quay.io/app"); ok || len(got) > 0 {
		t.Errorf("Lookup(quay.io/app) = %v, %v; want nothing", got, ok)
	}
	if n := len(env.runs(t, "test-plugin")); n != 1 {
		t.Errorf("plugin ran %d times, want 1", n)
	}
}

func TestPluginsOlderAPIVersion(t *testing.T) {
	t.Parallel()
	resp := strings.Replace(response("Global", "", map[string]string{"*.example.com": "u"}), "/v1", "/v1alpha1", 1)
	env := newPluginEnv(t, testProvider{
		apiVersion:  "credentialprovider.kubelet.k8s.io/v1alpha1",
		matchImages: []string{"*.example.com"},
		response:    resp,
	})
	if got, _ := env.plugins.Lookup("a.example.com/app"); !reflect.DeepEqual(got, []AuthConfig{user("u")}) {
		t.Errorf("Lookup = %v", got)
	}
	if req := env.request(t, "test-plugin"); req["apiVersion"] != "credentialprovider.kubelet.k8s.io/v1alpha1" {
		t.Errorf("request = %v, want apiVersion v1alpha1", req)
	}
}

func TestPluginsCache(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc          string
		cacheKeyType  string
		cacheDuration string // of the response; "" for none
		defaultCache  string // of the config
		images        []string
		advance       time.Duration // clock step before each lookup after the first
		wantRuns      int
	}{
		{desc: "image key, same image", cacheKeyType: "Image", cacheDuration: "1m", images: []string{"a.example.com/x", "a.example.com/x"}, wantRuns: 1},
		{desc: "image key, other image", cacheKeyType: "Image", cacheDuration: "1m", images: []string{"a.example.com/x", "a.example.com/y"}, wantRuns: 2},
		{desc: "registry key, same registry", cacheKeyType: "Registry", cacheDuration: "1m", images: []string{"a.example.com/x", "a.example.com/y"}, wantRuns: 1},
		{desc: "registry key, other registry", cacheKeyType: "Registry", cacheDuration: "1m", images: []string{"a.example.com/x", "b.example.com/x"}, wantRuns: 2},
		{desc: "global key", cacheKeyType: "Global", cacheDuration: "1m", images: []string{"a.example.com/x", "b.example.com/y", "c.example.com/z"}, wantRuns: 1},
		{desc: "zero duration is not cached", cacheKeyType: "Global", cacheDuration: "0s", defaultCache: "1h", images: []string{"a.example.com/x", "a.example.com/x"}, wantRuns: 2},
		{desc: "default duration", cacheKeyType: "Image", defaultCache: "1m", images: []string{"a.example.com/x", "a.example.com/x"}, wantRuns: 1},
		{desc: "default duration zero", cacheKeyType: "Image", images: []string{"a.example.com/x", "a.example.com/x"}, wantRuns: 2},
		{desc: "within the duration", cacheKeyType: "Image", cacheDuration: "1m", images: []string{"a.example.com/x", "a.example.com/x"}, advance: 59 * time.Second, wantRuns: 1},
		{desc: "expired", cacheKeyType: "Image", cacheDuration: "1m", images: []string{"a.example.com/x", "a.example.com/x"}, advance: 61 * time.Second, wantRuns: 2},
		{desc: "default duration expired", cacheKeyType: "Registry", defaultCache: "1m", images: []string{"a.example.com/x", "a.example.com/y"}, advance: 2 * time.Minute, wantRuns: 2},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			env := newPluginEnv(t, testProvider{
				matchImages:  []string{"*.example.com"},
				defaultCache: test.defaultCache,
				response:     response(test.cacheKeyType, test.cacheDuration, map[string]string{"*.example.com": "u"}),
			})
			for i, image := range test.images {
				if i > 0 {
					env.clock.Step(test.advance)
				}
				if got, _ := env.plugins.Lookup(image); !reflect.DeepEqual(got, []AuthConfig{user("u")}) {
					t.Errorf("Lookup(%q) = %v", image, got)
				}
			}
			if n := len(env.runs(t, "test-plugin")); n != test.wantRuns {
				t.Errorf("plugin ran %d times, want %d", n, test.wantRuns)
			}
		})
	}
}

func TestPluginsFailures(t *testing.T) {
	t.Parallel()
	good := response("Image", "", map[string]string{"*.example.com": "u"})
	for _, test := range []struct {
		desc     string
		provider testProvider
		wantLog  string
	}{
		{
			desc:     "plugin exits non-zero",
			provider: testProvider{name: "failing-plugin"},
			wantLog:  "error execing credential provider plugin failing-plugin for image a.example.com/app: exit status 3: registry unreachable",
		},
		{
			desc:     "response apiVersion differs",
			provider: testProvider{response: strings.Replace(good, "/v1", "/v1beta1", 1)},
			wantLog:  "apiVersion from credential plugin response did not match expected apiVersion:credentialprovider.kubelet.k8s.io/v1, actual apiVersion:credentialprovider.kubelet.k8s.io/v1beta1",
		},
		{
			desc:     "response not json",
			provider: testProvider{response: "password=hunter2"},
			wantLog:  "error reading GVK from response",
		},
		{
			desc:     "unknown response field",
			provider: testProvider{response: strings.Replace(good, `"auth"`, `"secret":"hunter2","auth"`, 1)},
			wantLog:  "error decoding credential provider plugin response from stdout",
		},
		{
			desc:     "wrong kind",
			provider: testProvider{response: strings.Replace(good, "CredentialProviderResponse", "CredentialProviderRequest", 1)},
			wantLog:  "error decoding credential provider plugin response from stdout",
		},
		{
			desc:     "bad cacheKeyType",
			provider: testProvider{response: response("Pod", "", map[string]string{"*.example.com": "u"})},
			wantLog:  "credential provider plugin did not return a valid cacheKeyType: Pod",
		},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			failing := test.provider
			failing.matchImages = []string{"*.example.com"}
			// A healthy second provider still answers.
			other := testProvider{name: "other-plugin", matchImages: []string{"a.example.com"}, response: response("Image", "", map[string]string{"a.example.com": "other"})}
			env := newPluginEnv(t, failing, other)

			got, ok := env.plugins.Lookup("a.example.com/app")
			if want := []AuthConfig{user("other")}; !ok || !reflect.DeepEqual(got, want) {
				t.Errorf("Lookup = %v, %v; want %v", got, ok, want)
			}
			entries := env.logs.FilterMessage("Failed to provide credentials for image").All()
			if len(entries) != 1 {
				t.Fatalf("logged %d failures, want 1: %v", len(entries), env.logs.All())
			}
			fields := entries[0].ContextMap()
			if fields["provider"] != failing.nameOr("test-plugin") || fields["image"] != "a.example.com/app" {
				t.Errorf("log fields = %v", fields)
			}
			if msg, _ := fields["error"].(string); !strings.Contains(msg, test.wantLog) || strings.Contains(msg, "hunter2") {
				t.Errorf("logged error %q, want it to contain %q and no credentials", msg, test.wantLog)
			}
		})
	}
}

func (p testProvider) nameOr(def string) string {
	if p.name == "" {
		return def
	}
	return p.name
}

func TestPluginsRequireServiceAccount(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		require  bool
		wantRuns int
	}{{true, 0}, {false, 1}} {
		t.Run(fmt.Sprintf("requireServiceAccount=%v", test.require), func(t *testing.T) {
			t.Parallel()
			env := newPluginEnv(t, testProvider{
				matchImages: []string{"*.example.com"},
				extra:       fmt.Sprintf("  tokenAttributes: {serviceAccountTokenAudience: aud, requireServiceAccount: %v, cacheType: ServiceAccount}\n", test.require),
				response:    response("Image", "", map[string]string{"*.example.com": "u"}),
			})
			env.plugins.Lookup("a.example.com/app")
			if n := len(env.runs(t, "test-plugin")); n != test.wantRuns {
				t.Errorf("plugin ran %d times, want %d", n, test.wantRuns)
			}
		})
	}
}

func TestNilPlugins(t *testing.T) {
	t.Parallel()
	var p *Plugins
	if got, ok := p.Lookup("a.example.com/app"); ok || got != nil {
		t.Errorf("Lookup = %v, %v", got, ok)
	}
}
