package auth

import (
	"os"
	"testing"
)

// writeFile writes data to path (mode 0600) or fails the test.
func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}
