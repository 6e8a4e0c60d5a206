package credentialprovider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	configv1 "k8s.io/kubelet/config/v1"
	credentialproviderapi "k8s.io/kubelet/pkg/apis/credentialprovider"
	"k8s.io/utils/clock"
)

// Plugins is the keyring of the exec credential provider plugins of a
// CredentialProviderConfig (--image-credential-provider-config and
// --image-credential-provider-bin-dir). A nil *Plugins has no credentials.
type Plugins struct {
	providers []*pluginProvider
	logger    *zap.Logger
	// accounts reads service accounts and their tokens for providers with
	// tokenAttributes (UseServiceAccounts); nil until the API server is known.
	accounts atomic.Pointer[ServiceAccounts]
}

// PluginsOption changes a default of NewPlugins.
type PluginsOption func(*pluginsOptions)

type pluginsOptions struct {
	logger   *zap.Logger
	clock    clock.Clock
	environ  func() []string
	saTokens bool
}

// WithServiceAccountTokens is the KubeletServiceAccountTokenForCredentialProviders
// gate (on by default): off, a provider with tokenAttributes is refused.
func WithServiceAccountTokens(enabled bool) PluginsOption {
	return func(o *pluginsOptions) { o.saTokens = enabled }
}

// WithLogger logs plugin failures and cache decisions to logger.
func WithLogger(logger *zap.Logger) PluginsOption {
	return func(o *pluginsOptions) {
		if logger != nil {
			o.logger = logger
		}
	}
}

// NewPlugins loads the CredentialProviderConfig at configPath (a file, or a
// directory whose *.json, *.yaml and *.yml files are merged in lexical
// order), validates it and checks that each provider's binary exists in
// binDir. It only wires: plugins run on Lookup. The kubelet calls it only when
// either path is set.
func NewPlugins(configPath, binDir string, opts ...PluginsOption) (*Plugins, error) {
	o := pluginsOptions{logger: zap.NewNop(), clock: clock.RealClock{}, environ: os.Environ, saTokens: true}
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := os.Stat(binDir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("plugin binary directory %s did not exist", binDir)
		}
		return nil, fmt.Errorf("error inspecting binary directory %s: %w", binDir, err)
	}
	cfg, err := loadPluginConfig(configPath, o.saTokens)
	if err != nil {
		return nil, err
	}
	codecs := newProtocolCodecs()
	logger := o.logger.Named("credential-provider")
	plugins := &Plugins{logger: logger}
	for i := range cfg.Providers {
		p, err := newPluginProvider(&cfg.Providers[i], binDir, codecs, o)
		if err != nil {
			return nil, err
		}
		p.accounts = &plugins.accounts
		p.logger = logger.With(zap.String("provider", p.name))
		plugins.providers = append(plugins.providers, p)
	}
	return plugins, nil
}

// loadPluginConfig reads and validates the config.
func loadPluginConfig(configPath string, saTokens bool) (*configv1.CredentialProviderConfig, error) {
	dec, err := newConfigDecoder()
	if err != nil {
		return nil, err
	}
	cfg, err := readPluginConfig(configPath, dec)
	if err != nil {
		return nil, err
	}
	if errs := validatePluginConfig(cfg, saTokens); len(errs) > 0 {
		return nil, fmt.Errorf("failed to validate credential provider config: %w", errs.ToAggregate())
	}
	return cfg, nil
}

// newPluginProvider wires one validated provider.
func newPluginProvider(p *configv1.CredentialProvider, binDir string, codecs serializer.CodecFactory, o pluginsOptions) (*pluginProvider, error) {
	bin := filepath.Join(binDir, p.Name)
	if _, err := exec.LookPath(bin); err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, exec.ErrNotFound) {
			return nil, fmt.Errorf("plugin binary executable %s did not exist", bin)
		}
		return nil, fmt.Errorf("error inspecting binary executable %s: %w", bin, err)
	}
	gv := pluginAPIVersions()[p.APIVersion]
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		return nil, fmt.Errorf("error initializing plugin provider %s: unsupported media type %q", p.Name, runtime.ContentTypeJSON)
	}
	env := make([]string, 0, len(p.Env))
	for _, e := range p.Env {
		env = append(env, e.Name+"="+e.Value)
	}
	return &pluginProvider{
		name:                 p.Name,
		matchImages:          p.MatchImages,
		defaultCacheDuration: p.DefaultCacheDuration.Duration,
		tokens:               newTokenAttributes(p.TokenAttributes),
		clock:                o.clock,
		cache:                newCredentialCache(o.clock),
		plugin: &execPlugin{
			name:       p.Name,
			path:       bin,
			apiVersion: p.APIVersion,
			args:       p.Args,
			env:        env,
			environ:    o.environ,
			encoder:    codecs.EncoderForVersion(info.Serializer, gv),
			decoder:    codecs.UniversalDecoder(),
		},
	}, nil
}

// Lookup implements Keyring for a pull made for no pod (the sandbox image):
// LookupForPod without a pod.
func (p *Plugins) Lookup(image string) ([]AuthConfig, bool) {
	return p.LookupForPod(context.Background(), image, Pod{})
}

// LookupForPod implements PodKeyring: every provider whose matchImages match
// image answers (from its cache or by running the plugin; one with
// tokenAttributes with the pod's service account token), and the union of
// their answers is matched against image as Docker config entries are. A
// failing plugin is logged and contributes nothing.
func (p *Plugins) LookupForPod(ctx context.Context, image string, pod Pod) ([]AuthConfig, bool) {
	if p == nil {
		return nil, false
	}
	k := &basicKeyring{}
	for _, provider := range p.providers {
		cfg, sa, err := provider.provide(ctx, image, pod)
		if err != nil {
			provider.logger.Error("Failed to provide credentials for image", zap.String("image", image),
				zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("serviceAccount", pod.ServiceAccountName), zap.Error(err))
			continue
		}
		k.addFrom(cfg, sa)
	}
	return k.lookup(image)
}

// UseServiceAccounts gives the providers with tokenAttributes the service
// accounts and tokens of the API server; before it is called (or standalone)
// they run without a token when they do not require one.
func (p *Plugins) UseServiceAccounts(accounts ServiceAccounts) {
	if p != nil {
		p.accounts.Store(&accounts)
	}
}

// pluginProvider is one configured plugin with its cache.
type pluginProvider struct {
	name                 string
	matchImages          []string
	defaultCacheDuration time.Duration
	// tokens are the provider's tokenAttributes; nil without.
	tokens   *tokenAttributes
	accounts *atomic.Pointer[ServiceAccounts]
	clock    clock.Clock
	logger   *zap.Logger
	plugin   *execPlugin
	cache    *credentialCache
	flight   singleflight.Group
}

// provide returns the plugin's credentials for image pulled for pod; an image
// the plugin does not match gets none. A provider with tokenAttributes sends
// the pod's service account token and annotations (serviceAccountToken) and
// keeps its answers per service account; the service account is returned
// with them (nil for a provider without tokenAttributes or a pod without one).
func (p *pluginProvider) provide(ctx context.Context, image string, pod Pod) (dockerConfig, *ServiceAccountCoordinates, error) {
	if !p.matches(image) {
		return nil, nil, nil
	}
	var sa saRequest
	if p.tokens != nil {
		var run bool
		var err error
		if sa, run, err = p.serviceAccountToken(ctx, image, pod); err != nil || !run {
			return nil, nil, err
		}
	}
	registry := registryOf(image)
	if cfg, ok := p.cache.get(cacheKey(image, sa.cacheKey), cacheKey(registry, sa.cacheKey), cacheKey(globalCacheKey, sa.cacheKey)); ok {
		return cfg, sa.account, nil
	}
	// Concurrent lookups of one image (with one token and one set of
	// annotations) share a run.
	// The run is shared: one caller's cancellation must not fail the others
	// (the plugin has its own timeout).
	runCtx := context.WithoutCancel(ctx)
	res, err, _ := p.flight.Do(sa.flightKey(image), func() (any, error) {
		return p.plugin.run(runCtx, image, sa.token, sa.annotations)
	})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to get credential from external registry credential provider: %w", err)
	}
	response := res.(*credentialproviderapi.CredentialProviderResponse)
	if sa.token != "" && p.tokens.cacheType != configv1.TokenServiceAccountTokenCacheType {
		for _, auth := range response.Auth {
			if auth.Password == sa.token {
				return nil, nil, errors.New("credential provider plugin returned the service account token as the password which is not allowed when service account cache type is not set to 'Token'")
			}
		}
	}
	cfg, err := p.remember(image, registry, sa.cacheKey, response)
	return cfg, sa.account, err
}

// remember turns the plugin's answer for image (of registry) into Docker
// config entries and caches them, per the answer's cacheKeyType (and the
// service account's key) and cacheDuration (the provider's default without
// one; 0: not cached).
func (p *pluginProvider) remember(image, registry, saKey string, response *credentialproviderapi.CredentialProviderResponse) (dockerConfig, error) {
	var key string
	switch response.CacheKeyType {
	case credentialproviderapi.ImagePluginCacheKeyType:
		key = image
	case credentialproviderapi.RegistryPluginCacheKeyType:
		key = registry
	case credentialproviderapi.GlobalPluginCacheKeyType:
		key = globalCacheKey
	default:
		return nil, fmt.Errorf("credential provider plugin did not return a valid cacheKeyType: %s", response.CacheKeyType)
	}
	cfg := make(dockerConfig, len(response.Auth))
	for match, auth := range response.Auth {
		cfg[match] = dockerConfigEntry{Username: auth.Username, Password: auth.Password}
	}

	ttl := p.defaultCacheDuration
	if response.CacheDuration != nil {
		ttl = response.CacheDuration.Duration
	}
	if ttl > 0 { // 0: do not cache
		p.cache.put(cacheKey(key, saKey), cfg, p.clock.Now().Add(ttl))
	}
	return cfg, nil
}

// matches says whether image matches one of the provider's matchImages.
func (p *pluginProvider) matches(image string) bool {
	for _, m := range p.matchImages {
		if ok, _ := urlsMatchStr(m, image); ok {
			return true
		}
	}
	return false
}

// registryOf is the registry host (with port) of image: its first component.
func registryOf(image string) string {
	registry, _, _ := strings.Cut(image, "/")
	return registry
}
