package credentialprovider

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// AuthConfig is one set of registry credentials, with the fields of CRI's
// runtimeapi.AuthConfig.
type AuthConfig struct {
	Username      string
	Password      string
	Auth          string
	ServerAddress string
	IdentityToken string
	RegistryToken string
	// ServiceAccount is the pod's service account whose token a credential
	// provider exchanged for these credentials; nil for the node's own.
	ServiceAccount *ServiceAccountCoordinates
}

// ServiceAccountCoordinates names a service account.
type ServiceAccountCoordinates struct {
	UID, Namespace, Name string
}

// CRI returns the credentials as the CRI PullImage request carries them.
func (a AuthConfig) CRI() *runtimeapi.AuthConfig {
	return &runtimeapi.AuthConfig{
		Username:      a.Username,
		Password:      a.Password,
		Auth:          a.Auth,
		ServerAddress: a.ServerAddress,
		IdentityToken: a.IdentityToken,
		RegistryToken: a.RegistryToken,
	}
}

// Keyring answers the credentials for an image (a repository name such as
// registry.example.com/team/app), most specific match first. The slice may be
// empty; the bool says whether anything matched.
type Keyring interface {
	Lookup(image string) ([]AuthConfig, bool)
}

// UnionKeyring asks each keyring in order and concatenates their answers;
// nil members are skipped.
type UnionKeyring []Keyring

// Lookup implements Keyring.
func (u UnionKeyring) Lookup(image string) ([]AuthConfig, bool) {
	var all []AuthConfig
	for _, k := range u {
		if k == nil {
			continue
		}
		found, _ := k.Lookup(image)
		all = append(all, found...)
	}
	return all, len(all) > 0
}

// LookupForPod implements PodKeyring: members that are PodKeyrings get the
// pod, the others are asked Lookup.
func (u UnionKeyring) LookupForPod(ctx context.Context, image string, pod Pod) ([]AuthConfig, bool) {
	var all []AuthConfig
	for _, k := range u {
		var found []AuthConfig
		switch k := k.(type) {
		case nil:
			continue
		case PodKeyring:
			found, _ = k.LookupForPod(ctx, image, pod)
		default:
			found, _ = k.Lookup(image)
		}
		all = append(all, found...)
	}
	return all, len(all) > 0
}

// Docker Hub: entries for https://index.docker.io/v1/ are stored under this
// key, and images without a registry host fall back to it.
const defaultRegistryHost = "index.docker.io"

// basicKeyring indexes the entries of Docker configs by registry key
// (host[:port][/path]), the keys sorted in reverse so that a longer path of
// the same host is tried before the bare host.
type basicKeyring struct {
	keys  []string
	creds map[string][]AuthConfig
}

// add indexes the entries of cfg. Schemes and a leading /v1/ or /v2/ of the
// entry are dropped, as the docker client does; unparsable entries are
// skipped.
func (k *basicKeyring) add(cfg dockerConfig) { k.addFrom(cfg, nil) }

// addFrom is add for the credentials a service account's token got (sa),
// or the node's own (nil).
func (k *basicKeyring) addFrom(cfg dockerConfig, sa *ServiceAccountCoordinates) {
	if k.creds == nil {
		k.creds = map[string][]AuthConfig{}
	}
	names := make([]string, 0, len(cfg))
	for name := range cfg {
		names = append(names, name)
	}
	sort.Strings(names) // same-key entries keep a stable order
	for _, name := range names {
		key, ok := registryKey(name)
		if !ok {
			continue
		}
		entry := cfg[name]
		if _, seen := k.creds[key]; !seen {
			k.keys = append(k.keys, key)
		}
		k.creds[key] = append(k.creds[key], AuthConfig{Username: entry.Username, Password: entry.Password, ServiceAccount: sa})
	}
	sort.Sort(sort.Reverse(sort.StringSlice(k.keys)))
}

// registryKey turns a Docker config entry name into its index key.
func registryKey(name string) (string, bool) {
	if !strings.HasPrefix(name, "https://") && !strings.HasPrefix(name, "http://") {
		name = "https://" + name
	}
	u, err := url.Parse(name)
	if err != nil {
		return "", false
	}
	p := u.Path
	if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
		p = p[len("/v1"):]
	}
	if p == "" || p == "/" {
		return u.Host, true
	}
	return u.Host + p, true
}

// lookup returns the credentials of every key matching image, most specific
// first; when none matches and image is a Docker Hub image, those of
// index.docker.io.
func (k *basicKeyring) lookup(image string) ([]AuthConfig, bool) {
	var out []AuthConfig
	for _, key := range k.keys {
		if ok, _ := urlsMatchStr(key, image); ok {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) > 0 {
		return out, true
	}
	if isDockerHubImage(image) {
		if hub, ok := k.creds[defaultRegistryHost]; ok {
			return hub, true
		}
	}
	return nil, false
}

// isDockerHubImage says whether image is pulled from Docker Hub: it has no
// registry part (its first component has neither '.' nor ':'), or the
// registry is docker.io or index.docker.io.
func isDockerHubImage(image string) bool {
	first, _, hasSlash := strings.Cut(image, "/")
	switch {
	case first == "":
		return false
	case !hasSlash:
		return true
	case first == "docker.io" || first == defaultRegistryHost:
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// parseSchemelessURL parses host[:port][/path] as a URL without a scheme.
func parseSchemelessURL(s string) (*url.URL, error) {
	u, err := url.Parse("https://" + s)
	if err != nil {
		return nil, err
	}
	u.Scheme = ""
	return u, nil
}

// urlsMatchStr is urlsMatch over schemeless strings.
func urlsMatchStr(glob, target string) (bool, error) {
	g, err := parseSchemelessURL(glob)
	if err != nil {
		return false, err
	}
	t, err := parseSchemelessURL(target)
	if err != nil {
		return false, err
	}
	return urlsMatch(g, t)
}

// urlsMatch says whether target matches glob: the same port, the same
// number of host labels each matching its glob label (filepath.Match, so
// *.example.com matches a.example.com but not a.b.example.com), and glob's
// path a prefix of target's.
func urlsMatch(glob, target *url.URL) (bool, error) {
	globLabels, globPort := splitHost(glob)
	targetLabels, targetPort := splitHost(target)
	if globPort != targetPort || len(globLabels) != len(targetLabels) {
		return false, nil
	}
	if !strings.HasPrefix(target.Path, glob.Path) {
		return false, nil
	}
	for i, pattern := range globLabels {
		ok, err := filepath.Match(pattern, targetLabels[i])
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// splitHost returns the dot-separated labels of u's host and its port.
func splitHost(u *url.URL) ([]string, string) {
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Host, ""
	}
	return strings.Split(host, "."), port
}
