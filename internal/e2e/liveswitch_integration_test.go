//go:build linux

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// TestIntegrationLiveSwitchUpstream replaces upstream's kubelet v1.37.1 by
// this one on a live node and back, with no pod restarted (issue 14 item 4).
// Upstream's kubelet runs the node's static pods on this binary's shim-only
// mode (the CRI shim a user of upstream's kubelet over Docker runs); both are
// stopped and this binary starts in docker mode on the same root dir, shim
// state and Docker: every pod must keep its UID and IP, every container its
// ID (no container is created or restarted). Then the way back: this
// kubelet stops, the shim-only instance and upstream's kubelet start again
// and must adopt the pods the same way.
//
// Upstream's kubelet runs in a private mount namespace whose kernel
// tunables (/proc/sys/vm/overcommit_memory, ...) are files holding the
// values it wants, with protectKernelDefaults set: it checks them instead of
// writing this shared machine's sysctls. It makes no iptables chains
// (makeIPTablesUtilChains false) and serves its read-only port on loopback,
// where the test reads its pods.
func TestIntegrationLiveSwitchUpstream(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	upstream, err := controlplane.UpstreamBinary(ctx, "upstream-kubelet")
	if err != nil {
		t.Fatal(err)
	}
	n := newNode(t)
	for i, body := range []string{liveSwitchPod("ls-a", ""), liveSwitchPod("ls-b", "  restartPolicy: OnFailure\n"),
		liveSwitchPod("ls-c", "  initContainers:\n  - name: init\n    image: @IMAGE@\n    imagePullPolicy: IfNotPresent\n    command: [\"true\"]\n")} {
		n.writeManifest(fmt.Sprintf("ls%d.yaml", i), body)
	}
	names := []string{"ls-a", "ls-b", "ls-c"}

	// 1. Upstream's kubelet on the shim-only instance.
	up := newUpstreamKubelet(t, n, upstream)
	n.useShimOnly()
	up.start(n)
	before := up.waitRunning(t, n, names, 3*time.Minute)
	ids := n.containers(true)
	if len(ids) != 7 { // 3 sandboxes, 3 app containers and the init container (exited)
		t.Fatalf("upstream's kubelet made %d containers, want 7: %v", len(ids), ids)
	}

	// 2. This kubelet in docker mode on the same root dir and shim state.
	up.stop(t)
	n.stopShimOnly(t)
	n.useDocker()
	n.start()
	n.checkTookOver(names, before, ids)

	// 3. And back to upstream's kubelet on the shim-only instance.
	if err := n.kubelet.stop(30 * time.Second); err != nil {
		t.Fatalf("stop this kubelet: %v", err)
	}
	n.useShimOnly()
	up.start(n)
	back := up.waitRunning(t, n, names, 2*time.Minute)
	for _, name := range names {
		if back[name].UID != before[name].UID || back[name].Status.PodIP != before[name].Status.PodIP {
			t.Errorf("%s: back on upstream's kubelet UID %s IP %s, first UID %s IP %s", name,
				back[name].UID, back[name].Status.PodIP, before[name].UID, before[name].Status.PodIP)
		}
	}
	time.Sleep(15 * time.Second)
	if again := n.containers(true); !sameSet(ids, again) {
		t.Fatalf("containers changed when upstream's kubelet took over again:\nfirst %v\nnow   %v", ids, again)
	}
	up.stop(t)
}

// checkTookOver checks, after this kubelet started on another's node, that
// every named pod runs with its UID and IP (a host network pod's IP is the
// node's, and upstream's kubelet reports none without an API server) and no
// restart, and that the containers are still ids after longer than a sync
// period and a manifest re-read: a kubelet that does not adopt a container
// or sandbox has replaced it by then.
func (n *node) checkTookOver(names []string, before map[string]v1.Pod, ids []string) {
	t := n.t
	t.Helper()
	for _, name := range names {
		p := n.waitPod(name, 2*time.Minute, "running, ready", func(p *v1.Pod) bool { return podReady(p) })
		b := before[name]
		if p.UID != b.UID || !p.Spec.HostNetwork && p.Status.PodIP != b.Status.PodIP {
			t.Errorf("%s: after the switch UID %s IP %s, before UID %s IP %s", name, p.UID, p.Status.PodIP, b.UID, b.Status.PodIP)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 0 {
				t.Errorf("%s/%s: restart count %d after the switch", name, cs.Name, cs.RestartCount)
			}
		}
	}
	time.Sleep(15 * time.Second)
	if after := n.containers(true); !sameSet(ids, after) {
		t.Fatalf("containers changed when this kubelet took over:\nbefore %v\nafter  %v", ids, after)
	}
}

func liveSwitchPod(name, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: @NS@
spec:
  terminationGracePeriodSeconds: 2
%s  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`, name, extra)
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue && p.Status.Phase == v1.PodRunning
		}
	}
	return false
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// upstreamKubelet is upstream's kubelet v1.37.1 on a node's directories.
type upstreamKubelet struct {
	bin, config, sysctls string
	roPort               int
	extra                []string // more flags
	p                    *proc
}

// upstreamTunables are the kernel tunables upstream's kubelet checks with
// protectKernelDefaults, and the values it wants.
var upstreamTunables = map[string]string{
	"vm/overcommit_memory": "1", "vm/panic_on_oom": "0", "kernel/panic": "10", "kernel/panic_on_oops": "1",
	"kernel/keys/root_maxkeys": "1000000", "kernel/keys/root_maxbytes": "25000000",
}

func newUpstreamKubelet(t *testing.T, n *node, bin string) *upstreamKubelet {
	t.Helper()
	u := &upstreamKubelet{bin: bin, config: filepath.Join(n.dir, "upstream-config.yaml"), sysctls: filepath.Join(n.dir, "sysctl"), roPort: freePort(t)}
	for name, v := range upstreamTunables {
		p := filepath.Join(u.sysctls, strings.ReplaceAll(name, "/", "_"))
		if err := os.MkdirAll(u.sysctls, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	resolv := filepath.Join(n.dir, "resolv.conf")
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
podLogsDir: %s
resolvConf: %s
staticPodPath: %s
fileCheckFrequency: 2s
syncFrequency: 10s
address: 127.0.0.1
port: %d
readOnlyPort: %d
healthzBindAddress: 127.0.0.1
healthzPort: %d
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: false
failSwapOn: false
protectKernelDefaults: true
makeIPTablesUtilChains: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 2%%, nodefs.inodesFree: 2%%, imagefs.available: 2%%, imagefs.inodesFree: 2%%}
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
`, n.logsDir, resolv, n.manifests, n.apiPort, u.roPort, n.healthz, n.cgroupRoot)
	if err := os.WriteFile(u.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	makeCgroupRoot(t, n.cgroupRoot)
	return u
}

// makeCgroupRoot creates a --cgroup-root in every hierarchy (upstream's
// kubelet requires it to exist), its cpuset initialised from the root's.
func makeCgroupRoot(t *testing.T, root string) {
	t.Helper()
	for _, mp := range cgroupMountpoints() {
		dir := filepath.Join(mp, root)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(mp, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// start runs upstream's kubelet on the node's current CRI endpoint.
func (u *upstreamKubelet) start(n *node) {
	n.t.Helper()
	var script strings.Builder
	for name := range upstreamTunables {
		fmt.Fprintf(&script, "mount --bind %s /proc/sys/%s && ", filepath.Join(u.sysctls, strings.ReplaceAll(name, "/", "_")), name)
	}
	args := []string{u.bin, "--config=" + u.config, "--container-runtime-endpoint=" + n.endpoint, "--root-dir=" + n.rootDir,
		"--cert-dir=" + filepath.Join(n.rootDir, "pki"), "--hostname-override=" + n.name, "-v=2"}
	args = append(args, u.extra...)
	script.WriteString("exec")
	for _, a := range args {
		script.WriteString(" '" + a + "'")
	}
	p, err := startProc("upstream-kubelet", filepath.Join(n.dir, "upstream-kubelet.log"), "unshare",
		"--mount", "--propagation", "slave", "--", "sh", "-c", script.String())
	if err != nil {
		n.t.Fatal(err)
	}
	u.p = p
	n.procs = append(n.procs, p)
	n.teardown = append([]func(){func() { _ = p.stop(30 * time.Second) }}, n.teardown...)
}

func (u *upstreamKubelet) stop(t *testing.T) {
	t.Helper()
	if u.p == nil || u.p.exited() {
		t.Fatalf("upstream's kubelet is not running: %v", u.p.err)
	}
	_ = u.p.stop(30 * time.Second) // its exit status after SIGTERM is not this test's
}

// pods reads the pods from upstream's read-only port.
func (u *upstreamKubelet) pods() ([]v1.Pod, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(u.roPort) + "/pods")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var list v1.PodList
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("/pods: %w", err)
	}
	return list.Items, nil
}

// waitRunning waits until upstream's kubelet reports every named static pod
// running and ready, and returns them by manifest name.
func (u *upstreamKubelet) waitRunning(t *testing.T, n *node, names []string, timeout time.Duration) map[string]v1.Pod {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		pods, err := u.pods()
		got := map[string]v1.Pod{}
		for _, p := range pods {
			for _, name := range names {
				// Without an API server it reports no IP for host network pods.
				if p.Name == n.podName(name) && podReady(&p) && (p.Status.PodIP != "" || p.Spec.HostNetwork) {
					got[name] = p
				}
			}
		}
		if len(got) == len(names) {
			return got
		}
		if u.p.exited() {
			t.Fatalf("upstream's kubelet exited: %v", u.p.err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("upstream's kubelet: pods %v not all running within %s (err %v): %s", names, timeout, err, podsJSON(pods))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
