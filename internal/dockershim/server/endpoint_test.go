package server

import (
	"errors"
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc     string
		endpoint string
		want     string
		wantErr  string
	}{
		{desc: "unix URL", endpoint: "unix:///var/run/dockershim.sock", want: "/var/run/dockershim.sock"},
		{desc: "plain path", endpoint: "/var/run/dockershim.sock", want: "/var/run/dockershim.sock"},
		{desc: "path is cleaned", endpoint: "unix:///var/run//x/../dockershim.sock", want: "/var/run/dockershim.sock"},
		{desc: "tcp scheme", endpoint: "tcp://127.0.0.1:1234", wantErr: `scheme "tcp" is not supported`},
		{desc: "npipe scheme", endpoint: "npipe:////./pipe/dockershim", wantErr: `scheme "npipe"`},
		{desc: "unix with relative path", endpoint: "unix://var/run/dockershim.sock", wantErr: "must be absolute"},
		{desc: "relative plain path", endpoint: "dockershim.sock", wantErr: "must be absolute"},
		{desc: "empty", endpoint: "", wantErr: "empty socket path"},
		{desc: "unix without path", endpoint: "unix://", wantErr: "empty socket path"},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			got, err := ParseEndpoint(test.endpoint)
			if test.wantErr != "" {
				if !errors.Is(err, ErrUnsupportedEndpoint) || !strings.Contains(err.Error(), test.wantErr) ||
					!strings.Contains(err.Error(), "--container-runtime-endpoint") {
					t.Fatalf("ParseEndpoint(%q) error = %v, want ErrUnsupportedEndpoint naming the flag and containing %q",
						test.endpoint, err, test.wantErr)
				}
				return
			}
			if err != nil || got != test.want {
				t.Fatalf("ParseEndpoint(%q) = %q, %v; want %q", test.endpoint, got, err, test.want)
			}
		})
	}
}
