package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
)

// TestIntegrationLiveSwitchCRIDockerd is the switch of a node that runs
// upstream's kubelet v1.37.1 on cri-dockerd v0.4.3 (the usual Docker node
// since 1.24) to this kubelet in docker mode, on the same Docker, root dir
// and CNI cache: every container keeps its ID and restart count, every pod
// its UID and IP, the host port's rules stay. cri-dockerd's checkpoints hold
// no IP: this shim reads it back from libcni's cache. Then the pods are
// deleted: the CNI DEL releases both IPs and removes the host port's rules
// and the cache entries (cri-dockerd's loopback ones included).
func TestIntegrationLiveSwitchCRIDockerd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	upstream, err := controlplane.UpstreamBinary(ctx, "upstream-kubelet")
	if err != nil {
		t.Fatal(err)
	}
	criDockerd, err := controlplane.UpstreamBinary(ctx, "cri-dockerd")
	if err != nil {
		t.Fatal(err)
	}
	// A private dockerd whose runc drops cri-dockerd's negative
	// oom_score_adj (see oomAdjWrapper); started before the node, so that
	// its cleanup runs after the node's.
	d := dockerd.Start(t, dockerd.Options{Images: []string{pauseImage, busyboxImage}, OCIRuntime: oomAdjWrapper(t)})
	n := newNode(t)
	n.rt = daemonView{d}
	n.writeChurnCNIConf() // bridge with ipMasq + portmap: per-pod nat rules
	cleanupHostportChains(t)
	c := &churner{n: n, ids: watchCreated(t, n)}
	hostPort := freePort(t)
	n.writeManifest("cd0.yaml", churnManifest("cd-a", 0))
	n.writeManifest("cd1.yaml", churnManifest("cd-b", hostPort))
	n.writeManifest("cd2.yaml", manifest("cd-c", `  hostNetwork: true
  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
`))
	names := []string{"cd-a", "cd-b", "cd-c"}

	// 1. Upstream's kubelet on cri-dockerd.
	up := newUpstreamKubelet(t, n, upstream)
	cdRoot := filepath.Join(n.dir, "cri-dockerd")
	cd := n.useCRIDockerd(criDockerd, cdRoot, d)
	up.start(n)
	before := up.waitRunning(t, n, names, 3*time.Minute)
	ids := n.containers(true)
	if len(ids) != 6 {
		t.Fatalf("upstream's kubelet on cri-dockerd made %d containers, want 6: %v", len(ids), ids)
	}
	reserved := n.reservedIPs()
	rules := c.iptablesRules()
	if len(reserved) != 2 || !hasHostPortRule(rules, hostPort) {
		t.Fatalf("under cri-dockerd: reserved IPs %v (want 2), rules %v (want a DNAT of port %d)", reserved, rules, hostPort)
	}

	// 2. This kubelet in docker mode takes over.
	up.stop(t)
	if err := cd.stop(30 * time.Second); err != nil {
		t.Logf("cri-dockerd after SIGTERM: %v", err)
	}
	n.endpoint = "unix://" + filepath.Join(n.dir, "k.sock")
	n.runtime = []string{"--container-runtime=docker", "--docker-endpoint=" + d.Endpoint, "--cri-dockerd-root-directory=" + cdRoot}
	n.start()
	n.checkTookOver(names, before, ids)
	if got := n.checkpoints(); len(got) != 3 {
		t.Errorf("this shim holds %d checkpoints after the switch, want the 3 adopted sandboxes: %v", len(got), got)
	}
	if got := n.reservedIPs(); !sameSet(got, reserved) {
		t.Errorf("reserved IPs changed with the switch: %v, before %v", got, reserved)
	}

	// 3. Deleting the pods releases what cri-dockerd set up.
	for i := range names {
		n.removeManifest(fmt.Sprintf("cd%d.yaml", i))
	}
	n.waitContainers(2*time.Minute, "all removed", true, func(ids []string) bool { return len(ids) == 0 })
	if got := n.reservedIPs(); len(got) != 0 {
		t.Errorf("IPs still reserved after the adopted pods were deleted: %v", got)
	}
	if got := c.iptablesRules(); len(got) != 0 {
		t.Errorf("iptables rules left after the adopted pods were deleted: %v", got)
	}
	if left := cacheEntriesOf(t, n.cniCache, ids); len(left) != 0 {
		t.Errorf("libcni cache entries left after the adopted pods were deleted: %v", left)
	}
}

// useCRIDockerd starts cri-dockerd v0.4.3 on d with the node's CNI
// directories and points the kubelet at it.
func (n *node) useCRIDockerd(bin, root string, d *dockerd.Daemon) *proc {
	n.t.Helper()
	sock := filepath.Join(n.dir, "cri-dockerd.sock")
	p, err := startProc("cri-dockerd", filepath.Join(n.dir, "cri-dockerd.log"), bin,
		"--container-runtime-endpoint=unix://"+sock,
		"--docker-endpoint="+d.Endpoint,
		"--cri-dockerd-root-directory="+root,
		"--network-plugin=cni",
		"--cni-conf-dir="+n.cniConf,
		"--cni-bin-dir="+cniBinDir,
		"--cni-cache-dir="+n.cniCache,
		"--pod-infra-container-image="+pauseImage,
		"--streaming-bind-addr=127.0.0.1",
		"--log-level=debug")
	if err != nil {
		n.t.Fatal(err)
	}
	n.procs = append(n.procs, p)
	n.teardown = append([]func(){func() { _ = p.stop(30 * time.Second) }}, n.teardown...)
	waitSocket(n.t, sock, p, 30*time.Second)
	n.useRemote("unix://"+sock, daemonView{d})
	return p
}

// oomAdjWrapper writes a runc wrapper for a private dockerd: this host's
// root lacks CAP_SYS_RESOURCE, so the oom_score_adj of -998 cri-dockerd
// gives every sandbox (as the 1.23 dockershim did) fails the container's
// start. The wrapper sets a negative oomScoreAdj in the bundle's config to
// 0 and runs the real runc; nothing else changes. (This kubelet's shim
// copes by itself: it clamps to what the host allows.)
func oomAdjWrapper(t *testing.T) string {
	t.Helper()
	runc, err := exec.LookPath("runc")
	if err != nil {
		t.Fatalf("runc (Docker's runtime) is required: %v", err)
	}
	script := `#!/bin/sh
prev=
for a in "$@"; do
	if [ "$prev" = --bundle ] || [ "$prev" = -b ]; then
		sed -i 's/"oomScoreAdj":-[0-9]*/"oomScoreAdj":0/' "$a/config.json"
	fi
	prev=$a
done
exec ` + runc + ` "$@"
`
	path := filepath.Join(t.TempDir(), "runc-no-negative-oom-adj")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// hasHostPortRule reports whether a nat rule forwards the host port.
func hasHostPortRule(rules []string, port int) bool {
	for _, r := range rules {
		if strings.Contains(r, fmt.Sprintf("--dport %d ", port)) && strings.Contains(r, "DNAT") {
			return true
		}
	}
	return false
}

// cacheEntriesOf lists the files of libcni's result cache that name one of
// the containers.
func cacheEntriesOf(t *testing.T, cacheDir string, ids []string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(cacheDir, "results"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		for _, id := range ids {
			if strings.Contains(e.Name(), id) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}
