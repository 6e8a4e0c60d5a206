// Package fstest builds file trees for tests (fake /proc, /sys and cgroup
// files) and removes the mounts a test leaves in its directories
// (UnmountUnder). It is test support: only _test.go files (and other
// internal/testutil packages) may import it. The tree helpers fail the test
// on error.
package fstest

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteTree creates root and writes files into it: each key is a path relative
// to root (its parent directories are created, mode 0755), each value the
// file's content (mode 0644).
func WriteTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatalf("fstest: %v", err)
	}
	for name, content := range files {
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("fstest: %v", err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatalf("fstest: %v", err)
		}
	}
}
