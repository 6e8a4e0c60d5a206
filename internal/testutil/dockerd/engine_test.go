//go:build linux

package dockerd

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A missing Docker 26 is an error that names the script to run, never a skip.
func TestDocker26NotUnpacked(t *testing.T) {
	t.Setenv("KDS_CACHE_DIR", t.TempDir())
	_, err := Docker26.dockerd()
	if err == nil || !strings.Contains(err.Error(), "scripts/docker26.sh") {
		t.Fatalf("err = %v, want one naming scripts/docker26.sh", err)
	}
}

func TestEngineFromEnv(t *testing.T) {
	for _, tc := range []struct {
		desc, env string
		want      Engine
		private   bool
		wantErr   bool
	}{
		{desc: "unset", env: "", want: HostEngine},
		{desc: "host", env: "host", want: HostEngine},
		{desc: "26", env: "26", want: Docker26, private: true},
		{desc: "unknown", env: "27", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Setenv(EngineEnv, tc.env)
			got, private, err := engineFromEnv()
			if (err != nil) != tc.wantErr || got != tc.want || private != tc.private {
				t.Fatalf("engineFromEnv() = %q, %v, %v; want %q, %v, error %v", got, private, err, tc.want, tc.private, tc.wantErr)
			}
		})
	}
}

// TestIntegrationDocker26 starts a private Docker 26 daemon (scripts/docker26.sh
// unpacks it) and runs a container in it: its runc is trixie's, on trixie's libc.
func TestIntegrationDocker26(t *testing.T) {
	d := Start(t, Options{Engine: Docker26, Images: []string{"kubelet-dockershim/busybox:latest"}})
	ctx := context.Background()
	out, err := d.CLI(ctx, "version", "--format", "{{.Server.Version}} {{.Server.APIVersion}}")
	if err != nil || !strings.HasPrefix(out, "26.1") {
		t.Fatalf("server version %q (%v), want 26.1", out, err)
	}
	out, err = d.CLI(ctx, "run", "--rm", "kubelet-dockershim/busybox:latest", "echo", "hello from 26")
	if err != nil || strings.TrimSpace(out) != "hello from 26" {
		t.Fatalf("docker run: %q, %v", out, err)
	}
	// The runc it runs is the cache's (trixie's), not the host's.
	want, err := exec.Command(filepath.Join(docker26Dir(), "bin", "runc"), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	out, err = d.CLI(ctx, "info", "--format", "{{.RuncCommit.ID}}")
	if err != nil || !strings.Contains(string(want), "commit: "+strings.TrimSpace(out)+"\n") {
		t.Fatalf("runc commit %q (%v), want the one of %s", out, err, want)
	}
}
