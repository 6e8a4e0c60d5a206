package credentialprovider

import "testing"

// FuzzDockerConfig: any config.json or .dockercfg on the node parses or is
// refused with errUnmarshal alone (the parse error may quote credentials and
// is logged), never a panic; a lookup in what parsed answers only its
// credentials and, for a well-formed image, only those of entries naming the
// image's registry host, index.docker.io for Docker Hub, or a pattern.
func FuzzDockerConfig(f *testing.F) {
	for _, seed := range []struct {
		data, image string
		legacy      bool
	}{
		{`{"auths":{"registry.example.com":{"username":"u","password":"p"},"https://index.docker.io/v1/":{"auth":"dTpw"}}}`, "docker.io/library/busybox", false},
		{`{"auths":{"*.example.com":{"auth":"dTpw"},"a.example.com/team":{"auth":"dTpw=="}}}`, "a.example.com/team/app", false},
		{`{"auths":{"a.example.com":{"auth":"bm9jb2xvbg"}}}`, "a.example.com/x", false},
		{`{"auths":{"a.example.com@evil.example.org:5000":{"username":"u"},"http://[::1]:5000/v2/":{"username":"v6"}}}`, "[::1]:5000/x", false},
		{`{"registry.example.com":{"username":"u","password":"p","email":"e"}}`, "registry.example.com/x", true},
		{`{"":{},"%zz":{"username":"u"}}`, "x", true},
		{`{"auths":{"a":{"auth":"!!!"}}}`, "a/x", false}, {`[`, "", true},
	} {
		f.Add([]byte(seed.data), seed.image, seed.legacy)
	}
	f.Fuzz(func(t *testing.T, data []byte, image string, legacy bool) {
		parse := parseDockerConfigJSON
		if legacy {
			parse = parseDockercfg
		}
		cfg, err := parse(data)
		if err != nil {
			if err != errUnmarshal || cfg != nil {
				t.Fatalf("parse error %v with %v, want errUnmarshal alone", err, cfg)
			}
			return
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
	})
}
