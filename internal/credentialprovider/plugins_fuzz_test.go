package credentialprovider

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/distribution/reference"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	configv1 "k8s.io/kubelet/config/v1"
	credentialproviderapi "k8s.io/kubelet/pkg/apis/credentialprovider"
	clocktesting "k8s.io/utils/clock/testing"
)

// FuzzPluginResponse: whatever a credential provider plugin prints, it is
// decoded (strictly, as the provider's apiVersion) or refused without a
// panic; a decoded answer with a valid cacheKeyType becomes one Docker
// config entry per auth key, cached under the image, its registry or the
// global key exactly when its duration is positive; and a lookup answers
// only the plugin's credentials, for a well-formed image only those whose
// key names the image's registry host (or a pattern).
func FuzzPluginResponse(f *testing.F) {
	for _, seed := range []struct{ response, image string }{
		{response("Image", "", map[string]string{"registry.example.com": "host", "registry.example.com/team": "team"}), "registry.example.com/team/app"},
		{response("Registry", "1h", map[string]string{"*.example.com": "u"}), "a.example.com/x"},
		{response("Global", "0s", map[string]string{"https://index.docker.io/v1/": "hub"}), "docker.io/library/busybox"},
		{response("Image", "-1m", map[string]string{"a.example.com@evil.example.org": "u", "[::1]:5000": "v6"}), "[::1]:5000/x"},
		{response("Other", "", nil), "a.example.com/x"},
		{`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","auth":{"a.example.com":{"username":"u","password":"p","extra":1}}}`, "a.example.com/x"},
		{`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1beta1","kind":"CredentialProviderResponse","cacheKeyType":"Image"}`, "a.example.com/x"},
		{`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderRequest","image":"x"}`, "a.example.com/x"},
		{`{"apiVersion":"credentialprovider.kubelet.k8s.io/v1","kind":"CredentialProviderResponse","cacheKeyType":"Image","cacheDuration":"x"}`, "x"},
		{`{"apiVersion":`, ""},
	} {
		f.Add([]byte(seed.response), seed.image)
	}
	p, clock := newFuzzProvider(f)
	f.Fuzz(func(t *testing.T, data []byte, image string) {
		resp, err := p.plugin.decodeResponse(data)
		if err != nil {
			if resp != nil {
				t.Fatalf("decode error %v with an answer %+v", err, resp)
			}
			return
		}
		checkAnswer(t, p, clock, resp, image)
	})
}

// FuzzPluginCacheKeys: FuzzPluginResponse's checks on answers built field
// by field (one auth key, a cacheKeyType and duration), so that the fuzzer
// explores the cache keys and the image matching rather than JSON.
func FuzzPluginCacheKeys(f *testing.F) {
	for _, seed := range []struct {
		keyType, authKey, image string
		seconds                 int64
	}{
		{"Image", "registry.example.com/team", "registry.example.com/team/app", 60},
		{"Registry", "*.example.com", "a.example.com/x", 3600},
		{"Registry", "*.example.com", "a.b.example.com/x", 3600},
		{"Global", "https://index.docker.io/v1/", "docker.io/library/busybox", 0},
		{"Image", "http://registry.example.com:5000/v2/", "registry.example.com:5000/x", -1},
		{"Image", "a.example.com@evil.example.org", "evil.example.org/x", 1},
		{"Image", "[::1]:5000", "[::1]:5000/x", 1},
		{"Registry", "evil.example.org", "a.example.com@evil.example.org/x", 1},
		{"Other", "a.example.com", "a.example.com/x", 1},
	} {
		f.Add(seed.keyType, seed.authKey, seed.image, seed.seconds)
	}
	p, clock := newFuzzProvider(f)
	f.Fuzz(func(t *testing.T, keyType, authKey, image string, seconds int64) {
		resp := &credentialproviderapi.CredentialProviderResponse{
			CacheKeyType: credentialproviderapi.PluginCacheKeyType(keyType),
			Auth:         map[string]credentialproviderapi.AuthConfig{authKey: {Username: "u", Password: "p"}},
		}
		if seconds != 0 {
			resp.CacheDuration = &metav1.Duration{Duration: time.Duration(seconds) * time.Second}
		}
		checkAnswer(t, p, clock, resp, image)
	})
}

// newFuzzProvider is a provider of the test plugin with a default cache
// duration of a minute and a fake clock.
func newFuzzProvider(f *testing.F) (*pluginProvider, *clocktesting.FakeClock) {
	clock := clocktesting.NewFakeClock(time.Now())
	p, err := newPluginProvider(&configv1.CredentialProvider{Name: "test-plugin", APIVersion: "credentialprovider.kubelet.k8s.io/v1",
		MatchImages: []string{"*.example.com"}, DefaultCacheDuration: &metav1.Duration{Duration: time.Minute}},
		testBinDir, newProtocolCodecs(), pluginsOptions{logger: zap.NewNop(), clock: clock, environ: os.Environ})
	if err != nil {
		f.Fatal(err)
	}
	return p, clock
}

// checkAnswer hands the plugin's answer for image to the provider (on an
// empty cache) and checks what it caches and what a lookup answers.
func checkAnswer(t *testing.T, p *pluginProvider, clock *clocktesting.FakeClock, resp *credentialproviderapi.CredentialProviderResponse, image string) {
	t.Helper()
	p.cache = newCredentialCache(clock)
	registry := registryOf(image)
	cfg, err := p.remember(image, registry, "", resp)
	switch resp.CacheKeyType {
	case credentialproviderapi.ImagePluginCacheKeyType, credentialproviderapi.RegistryPluginCacheKeyType, credentialproviderapi.GlobalPluginCacheKeyType:
	default:
		if err == nil {
			t.Fatalf("cacheKeyType %q accepted", resp.CacheKeyType)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg) != len(resp.Auth) {
		t.Fatalf("%d entries of %d auth keys", len(cfg), len(resp.Auth))
	}
	for key, auth := range resp.Auth {
		if e := cfg[key]; e.Username != auth.Username || e.Password != auth.Password {
			t.Fatalf("entry %q = %+v, want %+v", key, e, auth)
		}
	}
	ttl := time.Minute
	if resp.CacheDuration != nil {
		ttl = resp.CacheDuration.Duration
	}
	cached, ok := p.cache.get(image, registry, globalCacheKey)
	if ok != (ttl > 0) || ok && len(cached) != len(cfg) {
		t.Fatalf("cached %v (%v) for a duration of %v, want %v", cached, ok, ttl, cfg)
	}

	k := &basicKeyring{}
	k.add(cfg)
	got, found := k.lookup(image)
	if found != (len(got) > 0) {
		t.Fatalf("lookup(%q) = %v, %v", image, got, found)
	}
	allowed := allowedCredentials(cfg, image)
	for _, c := range got {
		if !allowed[c] {
			t.Fatalf("lookup(%q) answered %+v, which no entry of %v gives that image", image, c, cfg)
		}
	}
}

// allowedCredentials are the credentials of cfg that may be answered for
// image: any of them when image is not a well-formed reference; else those
// of entries whose key's host is the image's registry (Docker Hub also
// under index.docker.io) or a pattern.
func allowedCredentials(cfg dockerConfig, image string) map[AuthConfig]bool {
	named, err := reference.ParseNormalizedNamed(image)
	wellFormed := err == nil && strings.HasPrefix(image, reference.Domain(named)+"/")
	out := map[AuthConfig]bool{}
	for name, e := range cfg {
		key, ok := registryKey(name)
		if !ok {
			continue
		}
		host, _, _ := strings.Cut(key, "/")
		if wellFormed {
			domain := reference.Domain(named)
			pattern := strings.ContainsAny(host, `*?[\`)
			if !pattern && host != domain && (domain != "docker.io" || host != defaultRegistryHost) {
				continue
			}
		}
		out[AuthConfig{Username: e.Username, Password: e.Password}] = true
	}
	return out
}
