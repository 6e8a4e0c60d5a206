package fstest

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteTree(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "new", "root")
	WriteTree(t, root, map[string]string{"a": "1", "deep/er/b": "2"})
	for name, want := range map[string]string{"a": "1", "deep/er/b": "2"} {
		got, err := os.ReadFile(filepath.Join(root, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
		fi, err := os.Stat(filepath.Join(root, name))
		if err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s mode %v, %v; want 0644", name, fi.Mode(), err)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty")
	WriteTree(t, empty, nil)
	if fi, err := os.Stat(empty); err != nil || !fi.IsDir() {
		t.Errorf("root of an empty tree: %v, %v; want a directory", fi, err)
	}
}
