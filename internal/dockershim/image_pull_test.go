package dockershim

import (
	"encoding/base64"
	"errors"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

func TestImagePullAuthConfig(t *testing.T) {
	t.Parallel()
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct {
		desc    string
		in      *runtimeapi.AuthConfig
		want    *libdocker.AuthConfig
		wantErr bool
	}{
		{desc: "nil", in: nil, want: nil},
		{desc: "empty", in: &runtimeapi.AuthConfig{}, want: nil},
		{desc: "server only", in: &runtimeapi.AuthConfig{ServerAddress: "r.example"}, want: nil},
		{
			desc: "username and password",
			in:   &runtimeapi.AuthConfig{Username: "u", Password: "p", ServerAddress: "127.0.0.1:5000"},
			want: &libdocker.AuthConfig{Username: "u", Password: "p", ServerAddress: "127.0.0.1:5000"},
		},
		{
			desc: "auth field decoded; password may hold colons",
			in:   &runtimeapi.AuthConfig{Auth: b64("user:pa:ss")},
			want: &libdocker.AuthConfig{Username: "user", Password: "pa:ss"},
		},
		{
			desc: "explicit username wins over auth",
			in:   &runtimeapi.AuthConfig{Username: "u", Password: "p", Auth: b64("x:y")},
			want: &libdocker.AuthConfig{Username: "u", Password: "p"},
		},
		{
			desc: "tokens",
			in:   &runtimeapi.AuthConfig{IdentityToken: "id", RegistryToken: "reg"},
			want: &libdocker.AuthConfig{IdentityToken: "id", RegistryToken: "reg"},
		},
		{desc: "auth not base64", in: &runtimeapi.AuthConfig{Auth: "!!"}, wantErr: true},
		{desc: "auth without colon", in: &runtimeapi.AuthConfig{Auth: b64("user")}, wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := pullAuthConfig(tc.in)
			if tc.wantErr {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Fatalf("err = %v, want InvalidArgument", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tc.want == nil) || got != nil && *got != *tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestImagePullReference(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ desc, in, want string }{
		{"no tag", "busybox", "busybox:latest"},
		{"tag", "busybox:1.36", "busybox:1.36"},
		{"registry port, no tag", "127.0.0.1:5000/app", "127.0.0.1:5000/app:latest"},
		{"registry port and tag", "127.0.0.1:5000/app:v1", "127.0.0.1:5000/app:v1"},
		{"digest", "busybox@sha256:abc", "busybox@sha256:abc"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := pullReference(tc.in); got != tc.want {
				t.Errorf("pullReference(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
