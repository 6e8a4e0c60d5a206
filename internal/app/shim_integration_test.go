//go:build linux

package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// buildBinary builds the kubelet binary once per test into a temp dir.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubelet")
	cmd := exec.Command("go", "build", "-o", bin, "../..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestIntegrationBinaryShimOnly runs the real binary in shim-only mode against the
// real dockerd: the socket appears with mode 0660, crictl-style calls work, a stale
// socket is replaced, and SIGTERM stops it cleanly (exit 0, socket removed).
func TestIntegrationBinaryShimOnly(t *testing.T) {
	if out, err := exec.Command("docker", "info").CombinedOutput(); err != nil {
		t.Fatalf("dockerd is required: %v: %s", err, out)
	}
	bin := buildBinary(t)
	dir, err := os.MkdirTemp("", "kbl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "shim.sock")
	if err := os.WriteFile(sock, nil, 0o600); err != nil { // not a socket: must be refused
		t.Fatal(err)
	}
	args := []string{"--experimental-dockershim", "--container-runtime-endpoint=unix://" + sock,
		"--experimental-dockershim-root-directory=" + filepath.Join(dir, "root"), "--cni-conf-dir=" + filepath.Join(dir, "net.d"),
		"--cni-bin-dir=/usr/lib/cni", "--cni-cache-dir=" + filepath.Join(dir, "cache"), "--logging-format=json"}
	out, err := exec.Command(bin, args...).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "not a socket") {
		t.Fatalf("regular file at the endpoint: err %v, out %s", err, out)
	}
	_ = os.Remove(sock)

	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	waitSocket(t, sock, &stderr)
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v, %v", fi.Mode(), err)
	}
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil || v.RuntimeName != "docker" {
		t.Fatalf("Version = %v, %v", v, err)
	}
	if _, err := runtimeapi.NewImageServiceClient(conn).ListImages(ctx, &runtimeapi.ListImagesRequest{}); err != nil {
		t.Fatalf("ListImages: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit 20s after SIGTERM")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left after shutdown: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !strings.HasPrefix(line, "{") {
			t.Fatalf("--logging-format=json wrote a non-JSON line: %q", line)
		}
	}
}

func waitSocket(t *testing.T, sock string, stderr *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket %s did not appear; stderr:\n%s", sock, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freePort is a TCP port of 127.0.0.1 nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestIntegrationCgroupDriverFromRuntime: a kubelet configured with the other
// cgroup driver than Docker's takes Docker's (upstream's
// KubeletCgroupDriverFromCRI) and runs, saying so; it used to refuse to start.
func TestIntegrationCgroupDriverFromRuntime(t *testing.T) {
	out, err := exec.Command("docker", "info", "--format", "{{.CgroupDriver}}").Output()
	if err != nil {
		t.Fatalf("dockerd is required: %v", err)
	}
	docker := strings.TrimSpace(string(out))
	other := "systemd"
	if docker == "systemd" {
		other = "cgroupfs"
	}
	bin := buildBinary(t)
	dir, err := os.MkdirTemp("", "kcg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cmd := exec.Command(bin, "--cgroup-driver="+other, "--container-runtime-endpoint=unix://"+filepath.Join(dir, "k.sock"),
		"--experimental-dockershim-root-directory="+filepath.Join(dir, "shim"), "--root-dir="+filepath.Join(dir, "root"), "--cert-dir="+filepath.Join(dir, "root", "pki"),
		"--cni-conf-dir="+filepath.Join(dir, "net.d"), "--cni-bin-dir=/usr/lib/cni", "--cni-cache-dir="+filepath.Join(dir, "cache"),
		"--healthz-port=0", "--read-only-port=0", "--address=127.0.0.1", "--port="+strconv.Itoa(freePort(t)),
		// No cgroup of this shared machine is touched.
		"--cgroups-per-qos=false", "--enforce-node-allocatable=", "--logging-format=json")
	// Its kernel tunables go to a fake /proc/sys, not this shared machine's.
	cmd.Env = append(os.Environ(), procSysTestEnv+"="+fakeProcSys(t, nil))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	found := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var entry map[string]any
			if json.Unmarshal(sc.Bytes(), &entry) == nil && entry["msg"] == "Using cgroup driver setting received from the CRI runtime" {
				found <- entry
			}
		}
		close(found)
	}()
	select {
	case entry, ok := <-found:
		if !ok {
			t.Fatalf("the kubelet exited without taking the runtime's cgroup driver: %v", cmd.Wait())
		}
		if entry["cgroupDriver"] != docker || entry["configured"] != other {
			t.Fatalf("log entry %v, want cgroupDriver %q and configured %q", entry, docker, other)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no \"Using cgroup driver setting received from the CRI runtime\" within 60s")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
}
