package credentialprovider

import (
	"reflect"
	"testing"
)

func TestURLsMatch(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		glob, target string
		want         bool
	}{
		{"*.example.com", "a.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "a.b.example.com", false},
		{"*.*.example.com", "a.b.example.com", true},
		{"a.*.com", "a.example.com", true},
		{"a.example.*", "a.example.io", true},
		{"*-good.example.com", "x-good.example.com", true},
		{"*example.com", "a.example.com", false},
		{"k*.io", "quay.io", false},
		{"example.com", "example.org", false},
		{"example.com", "example.com/team/app", true},
		{"example.com/team", "example.com/team/app", true},
		{"example.com/team", "example.com/other/app", false},
		{"example.com/team/app", "example.com/team", false},
		{"*.example.com/team", "a.example.com/team/app", true},
		{"example.com:5000", "example.com:5000/app", true},
		{"example.com:5000", "example.com/app", false},
		{"example.com", "example.com:5000/app", false},
		{"*.example.com:5000/team", "a.example.com:5000/team/app", true},
		{"*.example.com:5001/team", "a.example.com:5000/team/app", false},
		{"[.example.com", "a.example.com", false}, // bad glob
	} {
		t.Run(test.glob+" vs "+test.target, func(t *testing.T) {
			t.Parallel()
			got, _ := urlsMatchStr(test.glob, test.target)
			if got != test.want {
				t.Errorf("urlsMatchStr(%q, %q) = %v, want %v", test.glob, test.target, got, test.want)
			}
		})
	}
}

func TestRegistryKey(t *testing.T) {
	t.Parallel()
	for _, test := range []struct{ entry, want string }{
		{"registry.example.com", "registry.example.com"},
		{"https://registry.example.com", "registry.example.com"},
		{"http://registry.example.com/", "registry.example.com"},
		{"https://index.docker.io/v1/", "index.docker.io"},
		{"https://registry.example.com/v2/team", "registry.example.com/team"},
		{"registry.example.com:5000/team/app", "registry.example.com:5000/team/app"},
	} {
		got, ok := registryKey(test.entry)
		if !ok || got != test.want {
			t.Errorf("registryKey(%q) = %q, %v; want %q", test.entry, got, ok, test.want)
		}
	}
	if _, ok := registryKey("https://bad host%zz"); ok {
		t.Error("registryKey accepted an unparsable entry")
	}
}

func user(name string) AuthConfig { return AuthConfig{Username: name, Password: name + "-pw"} }

func entry(name string) dockerConfigEntry {
	return dockerConfigEntry{Username: name, Password: name + "-pw"}
}

func TestBasicKeyringLookup(t *testing.T) {
	t.Parallel()
	cfg := dockerConfig{
		"registry.example.com":                   entry("host"),
		"https://registry.example.com/v2/team":   entry("team"),
		"registry.example.com/team/app":          entry("app"),
		"*.example.com":                          entry("glob"),
		"registry.example.com:5000":              entry("port"),
		"https://index.docker.io/v1/":            entry("hub"),
		"http://registry.example.com/team/other": entry("other"),
	}
	for _, test := range []struct {
		desc  string
		image string
		want  []AuthConfig
	}{
		{"most specific first", "registry.example.com/team/app", []AuthConfig{user("app"), user("team"), user("host"), user("glob")}},
		{"path prefix", "registry.example.com/team/tool", []AuthConfig{user("team"), user("host"), user("glob")}},
		{"host only", "registry.example.com/solo", []AuthConfig{user("host"), user("glob")}},
		{"glob", "other.example.com/app", []AuthConfig{user("glob")}},
		{"port must match", "registry.example.com:5000/team/app", []AuthConfig{user("port")}},
		{"unknown port", "registry.example.com:5001/app", nil},
		{"docker hub short name", "busybox", []AuthConfig{user("hub")}},
		{"docker hub user repo", "library/busybox", []AuthConfig{user("hub")}},
		{"docker.io", "docker.io/library/busybox", []AuthConfig{user("hub")}},
		{"index.docker.io", "index.docker.io/library/busybox", []AuthConfig{user("hub")}},
		{"other registry gets no hub creds", "quay.io/app", nil},
		{"localhost with port", "localhost:5000/app", nil},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			k := &basicKeyring{}
			k.add(cfg)
			got, ok := k.lookup(test.image)
			if ok != (len(test.want) > 0) || !reflect.DeepEqual(got, test.want) {
				t.Errorf("lookup(%q) = %v, %v; want %v", test.image, got, ok, test.want)
			}
		})
	}
}

func TestBasicKeyringSameKeyTwice(t *testing.T) {
	t.Parallel()
	k := &basicKeyring{}
	k.add(dockerConfig{"registry.example.com": entry("first")})
	k.add(dockerConfig{"https://registry.example.com/": entry("second")})
	got, _ := k.lookup("registry.example.com/app")
	if want := []AuthConfig{user("first"), user("second")}; !reflect.DeepEqual(got, want) {
		t.Errorf("lookup = %v, want %v", got, want)
	}
}

type fixedKeyring []AuthConfig

func (f fixedKeyring) Lookup(string) ([]AuthConfig, bool) { return f, len(f) > 0 }

func TestUnionKeyring(t *testing.T) {
	t.Parallel()
	var noPlugins *Plugins
	for _, test := range []struct {
		desc  string
		union UnionKeyring
		want  []AuthConfig
	}{
		{"empty", nil, nil},
		{"in order", UnionKeyring{fixedKeyring{user("a")}, fixedKeyring{user("b"), user("c")}}, []AuthConfig{user("a"), user("b"), user("c")}},
		{"nil and empty members", UnionKeyring{nil, fixedKeyring{}, noPlugins, fixedKeyring{user("a")}}, []AuthConfig{user("a")}},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			got, ok := test.union.Lookup("registry.example.com/app")
			if ok != (len(test.want) > 0) || !reflect.DeepEqual(got, test.want) {
				t.Errorf("Lookup = %v, %v; want %v", got, ok, test.want)
			}
		})
	}
}

func TestAuthConfigCRI(t *testing.T) {
	t.Parallel()
	a := AuthConfig{Username: "u", Password: "p", Auth: "a", ServerAddress: "s", IdentityToken: "i", RegistryToken: "r"}
	c := a.CRI()
	if c.Username != "u" || c.Password != "p" || c.Auth != "a" || c.ServerAddress != "s" || c.IdentityToken != "i" || c.RegistryToken != "r" {
		t.Errorf("CRI() = %+v", c)
	}
}
