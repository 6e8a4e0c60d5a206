// Package registry runs Debian's docker-registry with htpasswd auth on a free
// loopback port for tests that pull with credentials.
package registry

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Start runs a registry that accepts user/pass, stopped at the test's end,
// and returns its address (127.0.0.1:port). A missing docker-registry or
// htpasswd fails the test.
func Start(t testing.TB, user, pass string) string {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	hp, err := exec.Command("htpasswd", "-Bbn", user, pass).Output()
	if err != nil {
		t.Fatalf("htpasswd (apache2-utils) is required: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "htpasswd"), hp, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: error
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
auth:
  htpasswd:
    realm: fixture
    path: %s
`, filepath.Join(dir, "data"), addr, filepath.Join(dir, "htpasswd"))
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("docker-registry", "serve", filepath.Join(dir, "config.yml"))
	if err := cmd.Start(); err != nil {
		t.Fatalf("docker-registry is required: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			_ = resp.Body.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry on %s did not answer: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
