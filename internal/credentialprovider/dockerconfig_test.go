package credentialprovider

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	clocktesting "k8s.io/utils/clock/testing"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

func TestParseDockerConfigFormats(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc    string
		parse   func([]byte) (dockerConfig, error)
		data    string
		want    dockerConfig
		wantErr bool
	}{
		{
			desc:  "config.json with username and password",
			parse: parseDockerConfigJSON,
			data:  `{"auths":{"registry.example.com":{"username":"bob","password":"pw","email":"b@example.com"}}}`,
			want:  dockerConfig{"registry.example.com": {Username: "bob", Password: "pw", Email: "b@example.com"}},
		},
		{
			desc:  "config.json auth field wins",
			parse: parseDockerConfigJSON,
			data:  `{"auths":{"registry.example.com":{"username":"x","password":"y","auth":"` + b64("bob:p:w") + `"}}}`,
			want:  dockerConfig{"registry.example.com": {Username: "bob", Password: "p:w"}},
		},
		{
			desc:  "unpadded auth",
			parse: parseDockerConfigJSON,
			data:  `{"auths":{"r.example.com":{"auth":"` + base64.RawStdEncoding.EncodeToString([]byte("ab:c")) + `"}}}`,
			want:  dockerConfig{"r.example.com": {Username: "ab", Password: "c"}},
		},
		{
			desc:  "tokens are ignored",
			parse: parseDockerConfigJSON,
			data:  `{"auths":{"r.example.com":{"identitytoken":"it","registrytoken":"rt","auth":"` + b64("u:p") + `"}},"credsStore":"desktop"}`,
			want:  dockerConfig{"r.example.com": {Username: "u", Password: "p"}},
		},
		{
			desc:  "config.json without auths is valid and empty",
			parse: parseDockerConfigJSON,
			data:  `{"credsStore":"desktop"}`,
			want:  nil,
		},
		{
			desc:    "auth without colon",
			parse:   parseDockerConfigJSON,
			data:    `{"auths":{"r.example.com":{"auth":"` + b64("nocolon") + `"}}}`,
			wantErr: true,
		},
		{
			desc:    "auth not base64",
			parse:   parseDockerConfigJSON,
			data:    `{"auths":{"r.example.com":{"auth":"!!!"}}}`,
			wantErr: true,
		},
		{
			desc:  "legacy .dockercfg",
			parse: parseDockercfg,
			data:  `{"https://index.docker.io/v1/":{"auth":"` + b64("hub:pw") + `","email":"e"}}`,
			want:  dockerConfig{"https://index.docker.io/v1/": {Username: "hub", Password: "pw", Email: "e"}},
		},
		{
			desc:    "not json",
			parse:   parseDockercfg,
			data:    `registry: x`,
			wantErr: true,
		},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			got, err := test.parse([]byte(test.data))
			if test.wantErr {
				if err == nil {
					t.Fatalf("parse = %v, want an error", got)
				}
				if err.Error() != "error occurred while trying to unmarshal json" {
					t.Errorf("error %q may leak the file's content", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, test.want) {
				t.Errorf("parse = %v, %v; want %v", got, err, test.want)
			}
		})
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func jsonConfig(user string) string {
	return `{"auths":{"registry.example.com":{"auth":"` + b64(user+":pw") + `"}}}`
}

func legacyConfig(user string) string {
	return `{"registry.example.com":{"auth":"` + b64(user+":pw") + `"}}`
}

func TestDockerConfigSearchOrder(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc  string
		files map[string]string // relative to the test's temp dir
		want  string            // the user found, "" for none
	}{
		{"nothing", nil, ""},
		{"root dir config.json first", map[string]string{
			"root/config.json": jsonConfig("root"), "home/.docker/config.json": jsonConfig("home"), "root/.dockercfg": legacyConfig("legacy"),
		}, "root"},
		{"home config.json", map[string]string{"home/.docker/config.json": jsonConfig("home"), "slash/.docker/config.json": jsonConfig("slash")}, "home"},
		{"slash config.json", map[string]string{"slash/.docker/config.json": jsonConfig("slash")}, "slash"},
		{"any config.json before a .dockercfg", map[string]string{
			"root/.dockercfg": legacyConfig("legacy"), "slash/.docker/config.json": jsonConfig("slash"),
		}, "slash"},
		{"invalid config.json is skipped", map[string]string{
			"root/config.json": "{nope", "home/.docker/config.json": jsonConfig("home"),
		}, "home"},
		{"legacy in root dir", map[string]string{"root/.dockercfg": legacyConfig("root"), "home/.dockercfg": legacyConfig("home")}, "root"},
		{"legacy in home", map[string]string{"home/.dockercfg": legacyConfig("home"), "slash/.dockercfg": legacyConfig("slash")}, "home"},
		{"legacy in slash", map[string]string{"slash/.dockercfg": legacyConfig("slash")}, "slash"},
		{"config.json format is not read as .dockercfg", map[string]string{"home/.dockercfg": jsonConfig("home")}, ""},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, data := range test.files {
				writeFile(t, filepath.Join(dir, name), data)
			}
			search := dockerConfigSearch{
				jsonDirs: []string{filepath.Join(dir, "root"), filepath.Join(dir, "cwd"), filepath.Join(dir, "home", ".docker"), filepath.Join(dir, "slash", ".docker")},
				cfgDirs:  []string{filepath.Join(dir, "root"), filepath.Join(dir, "cwd"), filepath.Join(dir, "home"), filepath.Join(dir, "slash")},
			}
			k := newDockerConfigKeyring(search, clocktesting.NewFakePassiveClock(time.Now()), zaptest.NewLogger(t))
			got, ok := k.Lookup("registry.example.com/app")
			var want []AuthConfig
			if test.want != "" {
				want = []AuthConfig{{Username: test.want, Password: "pw"}}
			}
			if ok != (test.want != "") || !reflect.DeepEqual(got, want) {
				t.Errorf("Lookup = %v, %v; want %v", got, ok, want)
			}
		})
	}
}

func TestDefaultDockerConfigSearch(t *testing.T) {
	t.Parallel()
	home, _ := os.UserHomeDir()
	got := defaultDockerConfigSearch("/var/lib/kubelet")
	want := dockerConfigSearch{
		jsonDirs: []string{"/var/lib/kubelet", "", filepath.Join(home, ".docker"), "/.docker"},
		cfgDirs:  []string{"/var/lib/kubelet", "", home, "/"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaultDockerConfigSearch = %+v, want %+v", got, want)
	}
}

func TestDockerConfigKeyringCaches(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	writeFile(t, path, jsonConfig("old"))
	clock := clocktesting.NewFakePassiveClock(time.Now())
	k := newDockerConfigKeyring(dockerConfigSearch{jsonDirs: []string{dir}}, clock, zaptest.NewLogger(t))

	lookupUser := func() string {
		got, _ := k.Lookup("registry.example.com/app")
		if len(got) != 1 {
			t.Fatalf("Lookup = %v, want one entry", got)
		}
		return got[0].Username
	}
	if u := lookupUser(); u != "old" {
		t.Fatalf("first lookup found %q", u)
	}
	writeFile(t, path, jsonConfig("new"))
	clock.SetTime(clock.Now().Add(dockerConfigLifetime - time.Second))
	if u := lookupUser(); u != "old" {
		t.Errorf("within the lifetime found %q, want the kept %q", u, "old")
	}
	clock.SetTime(clock.Now().Add(2 * time.Second))
	if u := lookupUser(); u != "new" {
		t.Errorf("after the lifetime found %q, want %q", u, "new")
	}
}
