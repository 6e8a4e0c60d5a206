package kuberuntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzPullSecret: any pull secret a pod names (a .dockerconfigjson or a
// .dockercfg, written by whoever may create secrets in its namespace) gives
// credentials or an error for an image, never a panic; an error comes with no
// credentials, and every credential given is an entry of the secret whose
// key names the image's registry host or a pattern of hosts (Docker Hub's
// index.docker.io for docker.io images), with that key as its server.
func FuzzPullSecret(f *testing.F) {
	for _, seed := range []struct {
		data      string
		dockercfg bool
		image     string
	}{
		{data: `{"auths":{"registry.example.com":{"username":"u","password":"p"}}}`, image: "registry.example.com/team/app:1"},
		{data: `{"auths":{"https://index.docker.io/v1/":{"auth":"dTpw"}}}`, image: "busybox"},
		{data: `{"auths":{"*.example.com":{"auth":"dTpw"},"a.example.com/team":{"username":"t"}}}`, image: "a.example.com/team/app@sha256:" + strings.Repeat("a", 64)},
		{data: `{"auths":{"a.example.com@evil.example.org":{"username":"u"},"a.example.com:5000":{"auth":"%%%"}}}`, image: "a.example.com:5000/x"},
		{data: `{"auths":{"a.example.com":{"auth":"bm9jb2xvbg=="}}}`, image: "a.example.com/x"},
		{data: `{"registry.example.com":{"username":"u","password":"p","email":"e"}}`, dockercfg: true, image: "registry.example.com/x"},
		{data: `{"":{},"http://":{},"https://[::1]:5000/v2/":{"username":"v6"}}`, dockercfg: true, image: "[::1]:5000/x"},
		{data: `{"auths":null}`, image: "x"}, {data: `[`, image: "x"},
	} {
		f.Add([]byte(seed.data), seed.dockercfg, seed.image)
	}
	f.Fuzz(func(t *testing.T, data []byte, dockercfg bool, image string) {
		ref, err := parseImageRef(image)
		if err != nil {
			return // refused before any pull
		}
		repo := ref.repository()
		s := v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pull"}, Type: v1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{v1.DockerConfigJsonKey: data}}
		if dockercfg {
			s.Type, s.Data = v1.SecretTypeDockercfg, map[string][]byte{v1.DockerConfigKey: data}
		}
		creds, err := credentialsForImage([]v1.Secret{s}, repo)
		if err != nil {
			if creds != nil {
				t.Fatalf("error %v with credentials %v", err, creds)
			}
			return
		}
		entries, err := secretDockerConfig(&s)
		if err != nil {
			t.Fatalf("credentials given from a secret that does not decode: %v", err)
		}
		domain, _, _ := strings.Cut(repo, "/")
		for _, pc := range creds {
			c := pc.auth
			if pc.secret == nil || pc.secret.Name != "pull" || pc.secret.Namespace != "ns" || len(pc.secret.CredentialHash) != 64 {
				t.Fatalf("credentials of %q without their secret's coordinates and hash: %+v", c.ServerAddress, pc.secret)
			}
			host, _, _ := strings.Cut(c.ServerAddress, "/")
			if !strings.ContainsAny(host, `*?[\`) && host != domain && (domain != "docker.io" || host != defaultRegistryKey) {
				t.Fatalf("credentials of %q given for %s", c.ServerAddress, repo)
			}
			found := false
			for loc, e := range entries {
				key, ok := credentialKey(loc)
				if !ok || key != c.ServerAddress {
					continue
				}
				if a, err := e.authConfig(key); err == nil && a.Username == c.Username && a.Password == c.Password {
					found = true
				}
			}
			if !found {
				t.Fatalf("credentials %v are no entry of the secret", c)
			}
		}
	})
}
