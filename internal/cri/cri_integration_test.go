//go:build linux

package cri

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap/zaptest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestIntegrationShimEndpoint starts a shim-only instance of the kubelet binary
// against the real dockerd and talks to it through NewRuntimeService and
// NewImageService: the clients wait for the socket to appear, and Version,
// Status and ListImages answer and are counted.
func TestIntegrationShimEndpoint(t *testing.T) {
	if out, err := exec.Command("docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		t.Fatalf("dockerd is required: %v: %s", err, out)
	}
	dir, err := os.MkdirTemp("", "crit")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	bin := filepath.Join(dir, "kubelet")
	if out, err := exec.Command("go", "build", "-o", bin, "../..").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	writeConflist(t, filepath.Join(dir, "net.d"), filepath.Join(dir, "ipam"))

	sock := filepath.Join(dir, "cri.sock")
	ctx := startShim(t, bin, dir, sock)
	opts := Options{Endpoint: "unix://" + sock, Timeout: 30 * time.Second, Registerer: prometheus.NewRegistry(), Logger: zaptest.NewLogger(t)}
	rt, err := NewRuntimeService(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close(context.Background()) })
	images, err := NewImageService(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = images.Close(context.Background()) })

	v, err := rt.Version(ctx, "v1")
	if err != nil || v.RuntimeName != "docker" || v.RuntimeApiVersion != "v1" {
		t.Fatalf("Version = %v, %v; want runtime docker, API v1", v, err)
	}
	st, err := rt.Status(ctx, false)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	for _, c := range st.GetStatus().GetConditions() {
		if !c.Status {
			t.Errorf("condition %s false: %s %s", c.Type, c.Reason, c.Message)
		}
	}
	imgs, err := images.ListImages(ctx, nil)
	if err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	const pause = "registry.k8s.io/pause:3.10"
	if !slices.ContainsFunc(imgs, func(img *runtimeapi.Image) bool { return slices.Contains(img.RepoTags, pause) }) {
		t.Errorf("ListImages (%d images) lacks %s", len(imgs), pause)
	}

	reg := opts.Registerer.(*prometheus.Registry)
	for opType, want := range map[string]float64{"version": 2, "status": 1, "image_fs_info": 1, "list_images": 1} {
		if got := counter(t, reg, operationsTotalName, op(opType)); got != want {
			t.Errorf("operations{%s} = %v, want %v", opType, got, want)
		}
	}
}

// writeConflist writes a bridge + host-local network with a bridge name and a
// private /24 of its own into confDir.
func writeConflist(t *testing.T, confDir, ipamDir string) {
	t.Helper()
	n := os.Getpid() % 250
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"crit%d","plugins":[{"type":"bridge","bridge":"crit%d","isGateway":true,"ipMasq":false,`+
		`"ipam":{"type":"host-local","ranges":[[{"subnet":"10.247.%d.0/24"}]],"dataDir":%q}}]}`, n, n, n, ipamDir)
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "10-crit.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startShim starts the binary in shim-only mode serving sock. The returned
// ctx ends when the process exits, so a shim that dies stops the clients'
// wait. Cleanup stops it with SIGTERM (SIGKILL after 15s), by PID.
func startShim(t *testing.T, bin, dir, sock string) context.Context {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "--experimental-dockershim", "--container-runtime-endpoint=unix://"+sock,
		"--experimental-dockershim-root-directory="+filepath.Join(dir, "root"), "--cni-conf-dir="+filepath.Join(dir, "net.d"),
		"--cni-bin-dir=/usr/lib/cni", "--cni-cache-dir="+filepath.Join(dir, "cache"))
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan error, 1)
	go func() {
		exited <- cmd.Wait()
		cancel()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("shim exit after SIGTERM: %v", err)
			}
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("shim did not stop 15s after SIGTERM")
		}
		if t.Failed() {
			t.Logf("shim output:\n%s", stderr.String())
		}
	})
	return ctx
}
