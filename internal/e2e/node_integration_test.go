//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// cniNetwork is the name of the test CNI network (host-local keeps its
// reservations in <ipamDir>/<cniNetwork>).
const cniNetwork = "e2e"

// node is one standalone kubelet (static pods only) on private directories, with
// its own CNI bridge and /24, a unique node name and a unique pod namespace.
type node struct {
	t      testing.TB
	s      *suite
	id     string
	dir    string // short temp base: unix socket paths must stay < 108 bytes
	name   string // --hostname-override; static pods are named <pod>-<name>
	ns     string // the namespace every manifest of the test uses
	bridge string
	subnet string // first three octets, e.g. "10.251.17"

	manifests, rootDir, logsDir, ipamDir, cniConf, cniCache, shimRoot string

	healthz int
	// cgroupRoot is the node's --cgroup-root (/e2e-<id>): its pod cgroups and
	// orphan cleanup never touch another node's.
	cgroupRoot string
	apiPort    int      // --port, unused by a standalone node but kept off 10250
	endpoint   string   // the CRI endpoint the kubelet uses
	runtime    []string // --container-runtime flags
	extra      []string // more flags, appended after every other one
	env        []string // more environment variables of the kubelet (KEY=value)
	rt         runtimeView
	local      *http.Transport // to the local socket; see get
	kubelet    *proc
	shimOnly   *proc    // the shim-only instance of useShimOnly, if any
	procs      []*proc  // every process of the test, for logs on failure
	teardown   []func() // run in order after the kubelet stopped (runtimes, shims)
	cleaned    bool     // cleanup ran (a test may run it early; t.Cleanup then skips it)
}

// runtimeView lists a test's containers in the runtime under the kubelet.
type runtimeView interface {
	// containers returns the IDs of sandboxes and containers that carry every
	// label (k=v), running ones only unless all.
	containers(t testing.TB, all bool, labels ...string) []string
}

// newNode prepares a node in docker mode (the binary runs its own dockershim on
// a private socket against the suite's dockerd). It starts nothing.
func newNode(t testing.TB) *node {
	t.Helper()
	s := requireSuite(t)
	dir, err := os.MkdirTemp("", "e2e")
	if err != nil {
		t.Fatal(err)
	}
	id := randHex(3)
	n := &node{t: t, s: s, id: id, dir: dir, name: "node-" + id, ns: "e2e-" + id, bridge: "e2e" + id, cgroupRoot: "/e2e-" + id,
		manifests: filepath.Join(dir, "manifests"), rootDir: filepath.Join(dir, "root"), logsDir: filepath.Join(dir, "logs"),
		ipamDir: filepath.Join(dir, "ipam"), cniConf: filepath.Join(dir, "net.d"), cniCache: filepath.Join(dir, "cache"),
		shimRoot: filepath.Join(dir, "shim"), healthz: freePort(t), apiPort: freePort(t)}
	n.useDocker()
	t.Cleanup(n.cleanup) // registered first: runs after the cleanups of later fixtures
	for _, d := range []string{n.manifests, n.rootDir, n.logsDir, n.ipamDir, n.cniConf, n.cniCache, n.shimRoot} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.subnet = freeSubnet(t)
	n.writeCNIConf()
	n.writeConfig()
	return n
}

// useRemote points the kubelet at a CRI endpoint it does not run itself.
func (n *node) useRemote(endpoint string, rt runtimeView) {
	n.endpoint = endpoint
	n.runtime = []string{"--container-runtime=remote"}
	n.rt = rt
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// freeSubnet picks a random 10.25x.y.0/24 that no route of the host uses and
// no iptables rule names.
func freeSubnet(t testing.TB) string {
	t.Helper()
	routes, err := run(context.Background(), "ip", "-4", "route", "show")
	if err != nil {
		t.Fatalf("ip route: %v", err)
	}
	for range 50 {
		b := make([]byte, 2)
		_, _ = rand.Read(b)
		prefix := fmt.Sprintf("10.%d.%d", 250+int(b[0])%5, b[1])
		if !strings.Contains(routes, prefix+".") && !rulesNameSubnet(t, prefix) {
			return prefix
		}
	}
	t.Fatal("no free 10.25x.y.0/24 subnet")
	return ""
}

// writeCNIConf writes the bridge + host-local network of the node.
func (n *node) writeCNIConf() {
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"%s.0/24"}]]}}]}`, cniNetwork, n.bridge, n.ipamDir, n.subnet)
	if err := os.WriteFile(filepath.Join(n.cniConf, "10-e2e.conflist"), []byte(conf), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// useDefaultCNIConf replaces the node's network with the one the project
// installs (configs/cni/10-dockershim-bridge.conflist: bridge with ipMasq
// and hairpin, portmap, bandwidth) on the node's own bridge, subnet and
// host-local dir, so a test sees what a user's node gets.
func (n *node) useDefaultCNIConf() {
	n.t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "configs", "cni", "10-dockershim-bridge.conflist"))
	if err != nil {
		n.t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(data, &conf); err != nil {
		n.t.Fatalf("the project's conflist: %v", err)
	}
	conf["name"] = cniNetwork
	bridge := conf["plugins"].([]any)[0].(map[string]any)
	if bridge["type"] != "bridge" {
		n.t.Fatalf("the project's conflist starts with %v, not bridge", bridge["type"])
	}
	bridge["bridge"] = n.bridge
	ipam := bridge["ipam"].(map[string]any)
	ipam["dataDir"] = n.ipamDir
	ipam["ranges"] = [][]map[string]string{{{"subnet": n.subnet + ".0/24"}}}
	out, err := json.Marshal(conf)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.cniConf, "10-e2e.conflist"), out, 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// writeConfig writes the KubeletConfiguration file (pod logs and resolv.conf in the temp dir).
func (n *node) writeConfig() {
	resolv := filepath.Join(n.dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte("nameserver 192.0.2.53\nsearch e2e.invalid\n"), 0o644); err != nil {
		n.t.Fatal(err)
	}
	// The suite's dockerd and this host's disk are shared with everything
	// else: image GC is off (it would remove the unused images other tests
	// use; the GC tests run private dockerds) and the disk thresholds are low
	// enough that the host's own usage never evicts a test's pods. The eviction
	// tests set their own with flags.
	cfg := fmt.Sprintf("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\npodLogsDir: %s\nresolvConf: %s\n"+
		"imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\n"+
		"evictionHard: {memory.available: 100Mi, nodefs.available: 2%%, nodefs.inodesFree: 2%%, imagefs.available: 2%%, imagefs.inodesFree: 2%%}\n",
		n.logsDir, resolv)
	if err := os.WriteFile(filepath.Join(n.dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// args are the kubelet's flags.
func (n *node) args() []string {
	return append(append(append([]string{}, n.runtime...),
		"--container-runtime-endpoint="+n.endpoint,
		"--pod-manifest-path="+n.manifests,
		"--root-dir="+n.rootDir,
		"--cert-dir="+filepath.Join(n.rootDir, "pki"),
		"--hostname-override="+n.name,
		"--healthz-port="+strconv.Itoa(n.healthz),
		"--healthz-bind-address=127.0.0.1",
		"--address=127.0.0.1",
		"--port="+strconv.Itoa(n.apiPort),
		"--read-only-port=0",
		"--cni-conf-dir="+n.cniConf,
		"--cni-bin-dir="+cniBinDir,
		"--cni-cache-dir="+n.cniCache,
		"--experimental-dockershim-root-directory="+n.shimRoot,
		"--pod-infra-container-image="+pauseImage,
		"--file-check-frequency=2s",
		"--sync-frequency=10s",
		"--cgroup-driver=cgroupfs",
		"--cgroup-root="+n.cgroupRoot,
		"--config="+filepath.Join(n.dir, "config.yaml"),
		"-v=4",
		"--logging-format=json",
	), n.extra...)
}

// start starts the kubelet and waits until /healthz answers ok.
func (n *node) start() {
	n.t.Helper()
	if n.kubelet != nil && !n.kubelet.exited() {
		n.t.Fatal("kubelet already running")
	}
	p, err := startProcEnv("kubelet", filepath.Join(n.dir, "kubelet.log"), n.s.bin, n.env, n.args()...)
	if err != nil {
		n.t.Fatal(err)
	}
	n.kubelet = p
	n.procs = append(n.procs, p)
	n.waitHealthy(60 * time.Second)
}

// waitHealthy polls /healthz until it answers "ok".
func (n *node) waitHealthy(timeout time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		body, code, err := n.get("/healthz")
		if err == nil && code == http.StatusOK && body == "ok" {
			return
		}
		last = fmt.Sprintf("code %d body %q err %v", code, body, err)
		if n.kubelet.exited() {
			n.t.Fatalf("kubelet exited (%v) before it was healthy; last /healthz: %s", n.kubelet.err, last)
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("kubelet not healthy within %s; last /healthz: %s", timeout, last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// get fetches a path of the kubelet's local endpoints: /healthz from the
// healthz port, every other path from the root-only local socket under
// --root-dir (the healthz port serves nothing else, as upstream's).
func (n *node) get(path string) (string, int, error) {
	url := fmt.Sprintf("http://127.0.0.1:%d%s", n.healthz, path)
	c := http.Client{Timeout: 5 * time.Second, Transport: healthzTransport}
	if path != "/healthz" {
		url = "http://local" + path
		if n.local == nil { // one transport per node: its connections are reused
			n.local = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", n.localSocket())
			}}
		}
		c.Transport = n.local
	}
	resp, err := c.Get(url)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode, err
}

// healthzTransport is the transport of the healthz port's requests.
var healthzTransport = &http.Transport{}

// localSocket is the kubelet's root-only socket (/healthz, /pods, /metrics).
func (n *node) localSocket() string { return filepath.Join(n.rootDir, "kubelet-local.sock") }

// pods returns the node's pods from /pods.
func (n *node) pods() ([]v1.Pod, error) {
	body, code, err := n.get("/pods")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("/pods answered %d: %s", code, body)
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		return nil, fmt.Errorf("decode /pods: %w", err)
	}
	return list.Items, nil
}

// podName is the name the kubelet gives the static pod of a manifest named name.
func (n *node) podName(name string) string { return name + "-" + n.name }

// waitPod polls /pods until a pod named podName(name) satisfies cond, and returns
// it. It fails after timeout, or at once when the kubelet exits.
func (n *node) waitPod(name string, timeout time.Duration, what string, cond func(p *v1.Pod) bool) *v1.Pod {
	n.t.Helper()
	full := n.podName(name)
	deadline := time.Now().Add(timeout)
	var last []v1.Pod
	var lastErr error
	for {
		pods, err := n.pods()
		lastErr = err
		if err == nil {
			last = last[:0]
			for i := range pods {
				if pods[i].Name != full {
					continue
				}
				last = append(last, pods[i])
				if cond(&pods[i]) {
					return &pods[i]
				}
			}
		}
		if n.kubelet.exited() {
			n.t.Fatalf("kubelet exited (%v) while waiting for pod %s: %s", n.kubelet.err, full, what)
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("pod %s: %s: not within %s; last /pods error %v; last pods:\n%s", full, what, timeout, lastErr, podsJSON(last))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// waitNoPod polls /pods until no pod named podName(name) is listed.
func (n *node) waitNoPod(name string, timeout time.Duration) {
	n.t.Helper()
	full := n.podName(name)
	deadline := time.Now().Add(timeout)
	for {
		pods, err := n.pods()
		found := []v1.Pod{}
		for i := range pods {
			if pods[i].Name == full {
				found = append(found, pods[i])
			}
		}
		if err == nil && len(found) == 0 {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("pod %s still listed after %s (err %v):\n%s", full, timeout, err, podsJSON(found))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func podsJSON(pods []v1.Pod) string {
	var b strings.Builder
	for i := range pods {
		out, _ := json.MarshalIndent(struct {
			UID    string       `json:"uid"`
			Status v1.PodStatus `json:"status"`
		}{string(pods[i].UID), pods[i].Status}, "", " ")
		b.Write(out)
		b.WriteString("\n")
	}
	return b.String()
}

// writeManifest writes a manifest atomically (a dot file renamed into place);
// @NS@, @IMAGE@ and @PAUSE@ are replaced by the test's namespace and the images.
func (n *node) writeManifest(file, body string) {
	n.t.Helper()
	body = strings.NewReplacer("@NS@", n.ns, "@IMAGE@", busyboxImage, "@PAUSE@", pauseImage).Replace(body)
	tmp := filepath.Join(n.manifests, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(n.manifests, file)); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) removeManifest(file string) {
	n.t.Helper()
	if err := os.Remove(filepath.Join(n.manifests, file)); err != nil {
		n.t.Fatal(err)
	}
}

// containers lists the runtime's sandboxes and containers of the test's
// namespace that carry the extra labels too.
func (n *node) containers(all bool, labels ...string) []string {
	n.t.Helper()
	return n.rt.containers(n.t, all, append([]string{"io.kubernetes.pod.namespace=" + n.ns}, labels...)...)
}

// waitContainers polls until the number of matching containers satisfies ok.
func (n *node) waitContainers(timeout time.Duration, what string, all bool, ok func(ids []string) bool, labels ...string) []string {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ids := n.containers(all, labels...)
		if ok(ids) {
			return ids
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("containers (all=%v, labels %v): %s: not within %s; have %v", all, labels, what, timeout, ids)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// reservedIPs lists the addresses host-local holds for the node's network.
func (n *node) reservedIPs() []string {
	entries, err := os.ReadDir(filepath.Join(n.ipamDir, cniNetwork))
	if err != nil {
		return nil
	}
	var ips []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), n.subnet+".") {
			ips = append(ips, e.Name())
		}
	}
	return ips
}

// podLog returns the content of a container's CRI log file (stream and
// timestamp stripped): <podLogsDir>/<ns>_<name>_<uid>/<container>/<restart>.log.
func (n *node) podLog(p *v1.Pod, container string, restart int) (string, error) {
	path := filepath.Join(n.logsDir, p.Namespace+"_"+p.Name+"_"+string(p.UID), container, strconv.Itoa(restart)+".log")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		// <RFC3339Nano> <stdout|stderr> <F|P> <content>
		parts := strings.SplitN(line, " ", 4)
		if len(parts) < 3 {
			continue
		}
		if len(parts) == 4 {
			b.WriteString(parts[3])
		}
		if parts[2] == "F" {
			b.WriteString("\n")
		}
	}
	return b.String(), nil
}

// cleanup stops the processes by PID, removes the test's containers, the bridge
// and the temp dir, and prints the logs' tails if the test failed. It runs
// once: a test that is done with a node before its end may call it early.
func (n *node) cleanup() {
	if n.cleaned {
		return
	}
	n.cleaned = true
	t := n.t
	if n.local != nil {
		n.local.CloseIdleConnections()
	}
	if t.Failed() {
		printed := map[string]bool{}
		for _, p := range n.procs {
			if printed[p.logPath] {
				continue
			}
			printed[p.logPath] = true
			lines := 25
			if p.name == "kubelet" {
				lines = 80
			}
			t.Logf("--- tail of the %s log (%s):\n%s", p.name, p.logPath, tailFile(p.logPath, lines))
		}
	}
	if n.kubelet != nil && !n.kubelet.exited() {
		if err := n.kubelet.stop(30 * time.Second); err != nil {
			t.Logf("stopping the kubelet: %v", err)
		}
	}
	for _, f := range n.teardown {
		f()
	}
	switch rt := n.rt.(type) {
	case dockerView:
		n.s.removeContainers(t, "io.kubernetes.pod.namespace="+n.ns)
	case daemonView:
		rt.removeContainers(t, "io.kubernetes.pod.namespace="+n.ns)
	}
	// No CNI DEL ran for pods still running: their rules go with the subnet.
	if err := sweepRules(func(prefix string) bool { return prefix == n.subnet }); err != nil {
		t.Error(err)
	}
	_ = exec.Command("ip", "link", "del", n.bridge).Run()
	removeCgroupRoot(t, n.cgroupRoot)
	unmountUnder(n.dir)
	if err := os.RemoveAll(n.dir); err != nil {
		t.Logf("remove %s: %v", n.dir, err)
	}
}

// kill9 SIGKILLs the kubelet.
func (n *node) kill9() {
	n.t.Helper()
	n.kubelet.kill()
	if ws, ok := n.kubelet.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		n.t.Fatalf("kubelet was not killed by SIGKILL: %v", n.kubelet.err)
	}
}

// dockerView lists containers of the suite's private dockerd by label.
type dockerView struct{ s *suite }

func (d dockerView) containers(t testing.TB, all bool, labels ...string) []string {
	t.Helper()
	args := []string{"ps", "-q", "--no-trunc"}
	if all {
		args = append(args, "-a")
	}
	for _, l := range labels {
		args = append(args, "--filter", "label="+l)
	}
	out, err := d.s.dockerCLI(context.Background(), args...)
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, out)
	}
	return strings.Fields(out)
}

// removeContainers force-removes the private dockerd's containers with label l.
func (s *suite) removeContainers(t testing.TB, l string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := s.dockerCLI(ctx, "ps", "-aq", "--filter", "label="+l)
	if err != nil {
		t.Logf("docker ps: %v: %s", err, out)
		return
	}
	if ids := strings.Fields(out); len(ids) > 0 {
		if out, err := s.dockerCLI(ctx, append([]string{"rm", "-f"}, ids...)...); err != nil {
			t.Logf("docker rm: %v: %s", err, out)
		}
	}
}

// cgroupMountpoints are the cgroup hierarchies of this host (v1 controllers
// and named hierarchies, or the v2 mount).
func cgroupMountpoints() []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, pf := strings.Fields(pre), strings.Fields(post)
		if len(f) >= 5 && len(pf) >= 1 && (pf[0] == "cgroup" || pf[0] == "cgroup2") && !slices.Contains(out, f[4]) {
			out = append(out, f[4])
		}
	}
	return out
}

// removeCgroupRoot removes a node's --cgroup-root tree from every hierarchy,
// deepest first, once its pods are gone.
func removeCgroupRoot(t testing.TB, root string) {
	for _, mp := range cgroupMountpoints() {
		dir := filepath.Join(mp, root)
		var dirs []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
				t.Logf("remove cgroup %s: %v", dirs[i], err)
			}
		}
	}
}
