//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestIntegrationRemoteModeShim is (k): the same binary runs only the dockershim
// (--experimental-dockershim) and a second instance is the kubelet with
// --container-runtime=remote on the shim's socket; the pod of (a) runs.
func TestIntegrationRemoteModeShim(t *testing.T) {
	n := newNode(t)
	n.useShimOnly()
	n.start()
	checkPodRuns(t, n)
}

// useShimOnly starts a shim-only instance of the binary (--experimental-dockershim)
// on the node's dockerd, CNI config and state dirs, and points the node's
// kubelet at it in remote mode. The instance is stopped (SIGTERM, checked)
// after the kubelet.
func (n *node) useShimOnly() {
	n.t.Helper()
	sock := filepath.Join(n.dir, "shim.sock")
	shim, err := startProc("dockershim", filepath.Join(n.dir, "shim.log"), n.s.bin,
		"--experimental-dockershim",
		"--container-runtime-endpoint=unix://"+sock,
		"--docker-endpoint="+n.s.docker,
		"--experimental-dockershim-root-directory="+n.shimRoot,
		"--cni-conf-dir="+n.cniConf,
		"--cni-bin-dir="+cniBinDir,
		"--cni-cache-dir="+n.cniCache,
		"--pod-infra-container-image="+pauseImage,
		"-v=4", "--logging-format=json")
	if err != nil {
		n.t.Fatal(err)
	}
	n.procs = append(n.procs, shim)
	n.shimOnly = shim
	n.teardown = append(n.teardown, func() {
		if err := shim.stop(30 * time.Second); err != nil {
			n.t.Errorf("the shim-only instance after SIGTERM: %v", err)
		}
	})
	waitSocket(n.t, sock, shim, 30*time.Second)
	n.useRemote("unix://"+sock, dockerView{s: n.s})
}

// stopShimOnly stops the shim-only instance (SIGTERM), as a node's
// operator does when it replaces the kubelet and its shim.
func (n *node) stopShimOnly(t testing.TB) {
	t.Helper()
	if err := n.shimOnly.stop(30 * time.Second); err != nil {
		t.Fatalf("the shim-only instance after SIGTERM: %v", err)
	}
}

// useDocker points the node's kubelet back at its own dockershim (docker
// mode), as newNode does.
func (n *node) useDocker() {
	n.endpoint = "unix://" + filepath.Join(n.dir, "k.sock")
	n.runtime = []string{"--container-runtime=docker", "--docker-endpoint=" + n.s.docker}
	n.rt = dockerView{s: n.s}
}

// waitSocket waits for a unix socket to appear while p runs.
func waitSocket(t testing.TB, sock string, p *proc, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if fi, err := os.Stat(sock); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return
		}
		if p.exited() {
			t.Fatalf("%s exited (%v) before %s appeared", p.name, p.err, sock)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", sock, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIntegrationRemoteModeContainerd is (l): the kubelet with
// --container-runtime=remote on a private containerd 1.6 (CRI plugin) holding
// the local images; the pod of (a) runs.
func TestIntegrationRemoteModeContainerd(t *testing.T) {
	n := newNode(t)
	c := startContainerd(t, n)
	n.useRemote("unix://"+c.sock, c)
	n.start()
	checkPodRuns(t, n)
}
