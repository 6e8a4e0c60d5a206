package nodecontainer

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteTar(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "kubelet")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(filepath.Join(conf, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "sub", "a.yaml"), []byte("a: 1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/a.yaml", filepath.Join(conf, "link")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, map[string]string{"/usr/bin/kubelet": bin, "/etc/kds/": conf}); err != nil {
		t.Fatal(err)
	}
	type entry struct {
		mode     int64
		body     string
		linkname string
	}
	got := map[string]entry{}
	tr := tar.NewReader(&buf)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s: owner %d:%d (%q:%q), want root", hdr.Name, hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname)
		}
		body, _ := io.ReadAll(tr)
		got[hdr.Name] = entry{mode: hdr.Mode & 0o7777, body: string(body), linkname: hdr.Linkname}
	}
	want := map[string]entry{
		"etc/kds/":           {mode: 0o750},
		"etc/kds/link":       {mode: 0o777, linkname: "sub/a.yaml"},
		"etc/kds/sub/":       {mode: 0o750},
		"etc/kds/sub/a.yaml": {mode: 0o600, body: "a: 1"},
		"usr/bin/kubelet":    {mode: 0o755, body: "binary"},
	}
	if len(got) != len(want) {
		t.Errorf("entries %v, want %v", got, want)
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: got %+v (present %v), want %+v", name, g, ok, w)
		}
	}
}

func TestWriteTarRefusesDevices(t *testing.T) {
	t.Parallel()
	if err := writeTar(io.Discard, map[string]string{"/dev-null": "/dev/null"}); err == nil {
		t.Error("writeTar of /dev/null: no error, want one")
	}
}
