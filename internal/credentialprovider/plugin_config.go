package credentialprovider

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	configv1 "k8s.io/kubelet/config/v1"
	configv1alpha1 "k8s.io/kubelet/config/v1alpha1"
	configv1beta1 "k8s.io/kubelet/config/v1beta1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
)

// newConfigDecoder decodes the three versions of CredentialProviderConfig
// strictly (unknown and duplicate fields are errors), JSON or YAML.
func newConfigDecoder() (runtime.Decoder, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		configv1alpha1.AddToScheme, configv1beta1.AddToScheme, configv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("credential provider config scheme: %w", err)
		}
	}
	return serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer(), nil
}

// readPluginConfig reads the config file at path, or, when path is a
// directory, its *.json, *.yaml and *.yml files in lexical order with their
// providers concatenated (a provider name may appear only once).
func readPluginConfig(path string, dec runtime.Decoder) (*configv1.CredentialProviderConfig, error) {
	if path == "" {
		return nil, fmt.Errorf("credential provider config path is empty")
	}
	files, err := pluginConfigFiles(path)
	if err != nil {
		return nil, err
	}
	merged := &configv1.CredentialProviderConfig{}
	names := sets.New[string]()
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("unable to read file %q: %w", file, err)
		}
		cfg, err := decodePluginConfig(dec, data)
		if err != nil {
			return nil, fmt.Errorf("error decoding config %q: %w", file, err)
		}
		for _, p := range cfg.Providers {
			if names.Has(p.Name) {
				return nil, fmt.Errorf("duplicate provider name %q found in configuration file(s)", p.Name)
			}
			names.Insert(p.Name)
			merged.Providers = append(merged.Providers, p)
		}
	}
	return merged, nil
}

// pluginConfigFiles lists the config files path stands for.
func pluginConfigFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("unable to access path %q: %w", path, err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("unable to read directory %q: %w", path, err)
	}
	var files []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".json", ".yaml", ".yml":
			if !e.IsDir() {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no configuration files found in directory %q", path)
	}
	sort.Strings(files)
	return files, nil
}

// decodePluginConfig decodes one file, of any supported version, to v1.
func decodePluginConfig(dec runtime.Decoder, data []byte) (*configv1.CredentialProviderConfig, error) {
	obj, gvk, err := dec.Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	if gvk.Kind != "CredentialProviderConfig" {
		return nil, fmt.Errorf("failed to decode %q (wrong Kind)", gvk.Kind)
	}
	if gvk.Group != configv1.GroupName {
		return nil, fmt.Errorf("failed to decode CredentialProviderConfig, unexpected Group: %s", gvk.Group)
	}
	switch cfg := obj.(type) {
	case *configv1.CredentialProviderConfig:
		return cfg, nil
	case *configv1beta1.CredentialProviderConfig:
		out := &configv1.CredentialProviderConfig{}
		for _, p := range cfg.Providers {
			out.Providers = append(out.Providers, configv1.CredentialProvider{
				Name: p.Name, MatchImages: p.MatchImages, DefaultCacheDuration: p.DefaultCacheDuration,
				APIVersion: p.APIVersion, Args: p.Args, Env: convertEnv(p.Env, func(e configv1beta1.ExecEnvVar) (string, string) { return e.Name, e.Value }),
			})
		}
		return out, nil
	case *configv1alpha1.CredentialProviderConfig:
		out := &configv1.CredentialProviderConfig{}
		for _, p := range cfg.Providers {
			out.Providers = append(out.Providers, configv1.CredentialProvider{
				Name: p.Name, MatchImages: p.MatchImages, DefaultCacheDuration: p.DefaultCacheDuration,
				APIVersion: p.APIVersion, Args: p.Args, Env: convertEnv(p.Env, func(e configv1alpha1.ExecEnvVar) (string, string) { return e.Name, e.Value }),
			})
		}
		return out, nil
	}
	return nil, fmt.Errorf("unable to convert %T to *CredentialProviderConfig", obj)
}

func convertEnv[T any](in []T, get func(T) (string, string)) []configv1.ExecEnvVar {
	if in == nil {
		return nil
	}
	out := make([]configv1.ExecEnvVar, 0, len(in))
	for _, e := range in {
		name, value := get(e)
		out = append(out, configv1.ExecEnvVar{Name: name, Value: value})
	}
	return out
}

// tokenCacheTypes are the tokenAttributes.cacheType values, sorted.
func tokenCacheTypes() []string {
	return []string{
		string(configv1.ServiceAccountServiceAccountTokenCacheType),
		string(configv1.TokenServiceAccountTokenCacheType),
	}
}

// validatePluginConfig checks cfg as upstream does; saTokens is the
// KubeletServiceAccountTokenForCredentialProviders gate.
func validatePluginConfig(cfg *configv1.CredentialProviderConfig, saTokens bool) field.ErrorList {
	var errs field.ErrorList
	providersPath := field.NewPath("providers")
	if len(cfg.Providers) == 0 {
		errs = append(errs, field.Required(providersPath, "at least 1 item in plugins is required"))
	}
	seen := sets.New[string]()
	for _, p := range cfg.Providers {
		errs = append(errs, validateProviderName(providersPath.Child("name"), p.Name, seen)...)
		errs = append(errs, validateProviderExec(providersPath, &p)...)
		if p.TokenAttributes != nil {
			if !saTokens {
				errs = append(errs, field.Forbidden(providersPath.Child("tokenAttributes"),
					"tokenAttributes is not supported when KubeletServiceAccountTokenForCredentialProviders feature gate is disabled"))
			}
			errs = append(errs, validateTokenAttributes(providersPath.Child("tokenAttributes"), &p)...)
		}
	}
	return errs
}

func validateProviderName(path *field.Path, name string, seen sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if strings.Contains(name, "/") {
		errs = append(errs, field.Invalid(path, name, "provider name cannot contain '/'"))
	}
	if strings.Contains(name, " ") {
		errs = append(errs, field.Invalid(path, name, "provider name cannot contain spaces"))
	}
	if name == "." {
		errs = append(errs, field.Invalid(path, name, "provider name cannot be '.'"))
	}
	if name == ".." {
		errs = append(errs, field.Invalid(path, name, "provider name cannot be '..'"))
	}
	if seen.Has(name) {
		errs = append(errs, field.Duplicate(path, name))
	}
	seen.Insert(name)
	return errs
}

func validateProviderExec(path *field.Path, p *configv1.CredentialProvider) field.ErrorList {
	var errs field.ErrorList
	if p.APIVersion == "" {
		errs = append(errs, field.Required(path.Child("apiVersion"), ""))
	} else if _, ok := pluginAPIVersions()[p.APIVersion]; !ok {
		errs = append(errs, field.NotSupported(path.Child("apiVersion"), p.APIVersion, sets.List(sets.KeySet(pluginAPIVersions()))))
	}
	if len(p.MatchImages) == 0 {
		errs = append(errs, field.Required(path.Child("matchImages"), "at least 1 item in matchImages is required"))
	}
	for _, m := range p.MatchImages {
		if _, err := parseSchemelessURL(m); err != nil {
			errs = append(errs, field.Invalid(path.Child("matchImages"), m, "match image is invalid: "+err.Error()))
		}
	}
	if p.DefaultCacheDuration == nil {
		errs = append(errs, field.Required(path.Child("defaultCacheDuration"), ""))
	} else if p.DefaultCacheDuration.Duration < 0 {
		errs = append(errs, field.Invalid(path.Child("defaultCacheDuration"), p.DefaultCacheDuration, "must be greater than or equal to 0"))
	}
	return errs
}

func validateTokenAttributes(path *field.Path, p *configv1.CredentialProvider) field.ErrorList {
	var errs field.ErrorList
	ta := p.TokenAttributes
	if ta.ServiceAccountTokenAudience == "" {
		errs = append(errs, field.Required(path.Child("serviceAccountTokenAudience"), ""))
	}
	if ta.RequireServiceAccount == nil {
		errs = append(errs, field.Required(path.Child("requireServiceAccount"), ""))
	}
	if v1 := credentialproviderv1.SchemeGroupVersion.String(); p.APIVersion != v1 {
		errs = append(errs, field.Forbidden(path, fmt.Sprintf("tokenAttributes is only supported for %s API version", v1)))
	}
	if ta.RequireServiceAccount != nil && !*ta.RequireServiceAccount && len(ta.RequiredServiceAccountAnnotationKeys) > 0 {
		errs = append(errs, field.Forbidden(path.Child("requiredServiceAccountAnnotationKeys"), "requireServiceAccount cannot be false when requiredServiceAccountAnnotationKeys is set"))
	}
	errs = append(errs, validateAnnotationKeys(path.Child("requiredServiceAccountAnnotationKeys"), ta.RequiredServiceAccountAnnotationKeys)...)
	errs = append(errs, validateAnnotationKeys(path.Child("optionalServiceAccountAnnotationKeys"), ta.OptionalServiceAccountAnnotationKeys)...)
	both := sets.New(ta.RequiredServiceAccountAnnotationKeys...).Intersection(sets.New(ta.OptionalServiceAccountAnnotationKeys...))
	if both.Len() > 0 {
		errs = append(errs, field.Invalid(path, sets.List(both), "annotation keys cannot be both required and optional"))
	}
	switch {
	case ta.CacheType == "":
		errs = append(errs, field.Required(path.Child("cacheType"), "cacheType is required to be set when tokenAttributes is specified. Supported values are: "+strings.Join(tokenCacheTypes(), ", ")))
	case sets.New(tokenCacheTypes()...).Has(string(ta.CacheType)):
	default:
		errs = append(errs, field.NotSupported(path.Child("cacheType"), ta.CacheType, tokenCacheTypes()))
	}
	return errs
}

// validateAnnotationKeys checks annotation keys as object metadata does
// (qualified names, case-insensitively) and refuses repeats.
func validateAnnotationKeys(path *field.Path, keys []string) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for _, k := range keys {
		for _, msg := range validation.IsQualifiedName(strings.ToLower(k)) {
			errs = append(errs, field.Invalid(path, k, msg))
		}
		if seen.Has(k) {
			errs = append(errs, field.Duplicate(path, k))
		}
		seen.Insert(k)
	}
	return errs
}
