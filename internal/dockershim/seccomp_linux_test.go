package dockershim

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadSeccompProfile(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "seccomp")
	for _, d := range []string{root, filepath.Join(root, "sub"), filepath.Join(root, "dir.json")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string, b []byte) {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "ok.json"), []byte(`{}`))
	write(filepath.Join(base, "outside.json"), []byte(`{}`))
	write(filepath.Join(root, "big.json"), make([]byte, maxSeccompProfileSize+1))
	write(filepath.Join(root, "max.json"), make([]byte, maxSeccompProfileSize))
	if err := syscall.Mkfifo(filepath.Join(root, "fifo.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"in.json": "ok.json", "sub/up.json": "../ok.json", "out.json": "../outside.json", "abs.json": filepath.Join(base, "outside.json")} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		ref, wantErr string
	}{
		{ref: filepath.Join(root, "ok.json")},
		{ref: filepath.Join(root, "max.json")},
		{ref: filepath.Join(root, "in.json")},     // a symlink that stays below the root
		{ref: filepath.Join(root, "sub/up.json")}, // .. inside a link target, still below the root
		{ref: filepath.Join(base, "outside.json"), wantErr: "under the seccomp profile root"},
		{ref: root + "/../outside.json", wantErr: "clean absolute path"},
		{ref: "ok.json", wantErr: "absolute path"},
		{ref: root, wantErr: "under the seccomp profile root"},
		{ref: filepath.Join(root, "out.json"), wantErr: "open profile"},
		{ref: filepath.Join(root, "abs.json"), wantErr: "open profile"},
		{ref: filepath.Join(root, "missing.json"), wantErr: "no such file"},
		{ref: filepath.Join(root, "dir.json"), wantErr: "not a regular file"},
		{ref: filepath.Join(root, "fifo.json"), wantErr: "not a regular file"},
		{ref: filepath.Join(root, "big.json"), wantErr: "larger than"},
	} {
		_, err := readSeccompProfile(root, tc.ref)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("readSeccompProfile(%q) = %v, want error %q", tc.ref, err, tc.wantErr)
		}
	}
}
