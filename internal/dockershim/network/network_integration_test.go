//go:build linux

package network

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
)

// The integration tests drive the real plugins of /usr/lib/cni as root. Each
// test owns a bridge, a /24 under 10.201.0.0/16, its network namespaces, a
// host-local data dir and a libcni cache, and removes them all. The only
// traffic is inside the test's own bridge and namespaces.

const testBinDir = "/usr/lib/cni"

// hostportChains are the shared nat chains portmap creates on first use and
// never removes; DEL removes only each sandbox's own chains.
var hostportChains = []string{"CNI-HOSTPORT-DNAT", "CNI-HOSTPORT-MASQ", "CNI-HOSTPORT-SETMARK"}

func TestMain(m *testing.M) {
	existed := exec.Command("iptables", "-t", "nat", "-S", hostportChains[0]).Run() == nil
	m.Run()
	if !existed {
		if err := removeIdleHostportChains(); err != nil {
			fmt.Fprintln(os.Stderr, "removing portmap's chains:", err)
		}
	}
}

// removeIdleHostportChains removes portmap's shared chains, and the jumps
// to them, when these tests created them and no sandbox uses them anymore
// (CNI-HOSTPORT-DNAT holds no per-sandbox jump).
func removeIdleHostportChains() error {
	out, err := exec.Command("iptables", "-t", "nat", "-S", hostportChains[0]).Output()
	if err != nil {
		return nil // gone already
	}
	if strings.Contains(string(out), "-A "+hostportChains[0]) {
		return nil // a sandbox, maybe someone else's, still forwards ports
	}
	for _, chain := range []string{"PREROUTING", "OUTPUT", "POSTROUTING"} {
		out, err := exec.Command("iptables", "-t", "nat", "-S", chain).Output()
		if err != nil {
			return fmt.Errorf("listing %s: %w", chain, err)
		}
		var jumps []int
		num := 0
		for _, line := range strings.Split(string(out), "\n") {
			if !strings.HasPrefix(line, "-A ") {
				continue
			}
			num++
			if strings.Contains(line, "-j CNI-HOSTPORT-") {
				jumps = append(jumps, num)
			}
		}
		for i := len(jumps) - 1; i >= 0; i-- { // highest first keeps numbers valid
			if out, err := exec.Command("iptables", "-t", "nat", "-D", chain, fmt.Sprint(jumps[i])).CombinedOutput(); err != nil {
				return fmt.Errorf("deleting rule %d of %s: %w: %s", jumps[i], chain, err, out)
			}
		}
	}
	for _, op := range []string{"-F", "-X"} {
		for _, chain := range hostportChains {
			if out, err := exec.Command("iptables", "-t", "nat", op, chain).CombinedOutput(); err != nil {
				return fmt.Errorf("iptables %s %s: %w: %s", op, chain, err, out)
			}
		}
	}
	return nil
}

type cniEnv struct {
	t        *testing.T
	confDir  string
	cacheDir string
	dataDir  string // host-local's
	network  string
	bridge   string
	subnet   *net.IPNet
	gateway  string
	m        *Manager
}

func randHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// routed reports whether a route other than the default one covers ip, so
// tests never pick a subnet the host already uses.
func routed(t *testing.T, ip string) bool {
	t.Helper()
	for _, line := range strings.Split(run(t, "ip", "-o", "route", "show", "match", ip), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] != "default" {
			return true
		}
	}
	return false
}

// newCNIEnv checks the prerequisites (failing, never skipping) and returns
// an environment whose conf dir is still empty.
func newCNIEnv(t *testing.T) *cniEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the CNI integration tests need root")
	}
	for _, p := range []string{"loopback", "bridge", "host-local", "portmap", "tuning"} {
		if _, err := os.Stat(filepath.Join(testBinDir, p)); err != nil {
			t.Fatalf("CNI plugin %s missing (install containernetworking-plugins): %v", p, err)
		}
	}
	for _, tool := range []string{"ip", "iptables-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s missing: %v", tool, err)
		}
	}
	suffix := randHex(t, 4)
	b := make([]byte, 1)
	for {
		if _, err := rand.Read(b); err != nil {
			t.Fatal(err)
		}
		if !routed(t, fmt.Sprintf("10.201.%d.1", b[0])) {
			break
		}
	}
	_, subnet, _ := net.ParseCIDR(fmt.Sprintf("10.201.%d.0/24", b[0]))
	tmp := t.TempDir()
	e := &cniEnv{
		t:        t,
		confDir:  filepath.Join(tmp, "net.d"),
		cacheDir: filepath.Join(tmp, "cache"),
		dataDir:  filepath.Join(tmp, "ipam"),
		network:  "cnitest-" + suffix,
		bridge:   "cnitest" + suffix,
		subnet:   subnet,
		gateway:  fmt.Sprintf("10.201.%d.1", b[0]),
	}
	if err := os.MkdirAll(e.confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The bridge plugin leaves its bridge behind on DEL.
		if err := exec.Command("ip", "link", "show", e.bridge).Run(); err == nil {
			if out, err := exec.Command("ip", "link", "del", e.bridge).CombinedOutput(); err != nil {
				t.Errorf("deleting bridge %s: %v: %s", e.bridge, err, out)
			}
		}
	})
	m, err := New(Options{ConfDir: e.confDir, BinDirs: []string{testBinDir}, CacheDir: e.cacheDir, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	return e
}

// conflist returns bridge + host-local, then extra plugins, then portmap.
func (e *cniEnv) conflist(extra ...string) string {
	plugins := []string{fmt.Sprintf(`{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":false,`+
		`"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":%q,"gateway":%q}]]}}`,
		e.bridge, e.dataDir, e.subnet.String(), e.gateway)}
	plugins = append(plugins, extra...)
	plugins = append(plugins, `{"type":"portmap","capabilities":{"portMappings":true}}`)
	return fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[%s]}`, e.network, strings.Join(plugins, ","))
}

func (e *cniEnv) writeConf(name, content string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.confDir, name), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// newNetNS creates a named netns and removes it when the test ends (unless
// the test removed it already).
func (e *cniEnv) newNetNS() (name, path string) {
	e.t.Helper()
	name = "cnitest-" + randHex(e.t, 6)
	run(e.t, "ip", "netns", "add", name)
	e.t.Cleanup(func() { e.delNetNS(name) })
	return name, filepath.Join("/run/netns", name)
}

func (e *cniEnv) delNetNS(name string) {
	if _, err := os.Stat(filepath.Join("/run/netns", name)); err != nil {
		return
	}
	if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
		e.t.Errorf("deleting netns %s: %v: %s", name, err, out)
	}
}

func (e *cniEnv) newPod(netns string) Pod {
	id := randHex(e.t, 32) // a full 64-hex sandbox ID
	return Pod{ID: id, Name: "pod-" + id[:6], Namespace: "default", UID: "uid-" + id[:8], NetNS: netns}
}

// reservedIPs lists the addresses host-local holds in the test's data dir.
func (e *cniEnv) reservedIPs() []string {
	e.t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.dataDir, e.network))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	var ips []string
	for _, en := range entries {
		if net.ParseIP(en.Name()) != nil {
			ips = append(ips, en.Name())
		}
	}
	return ips
}

// cachedFiles lists libcni's cached results that mention id.
func (e *cniEnv) cachedFiles(id string) []string {
	e.t.Helper()
	entries, _ := os.ReadDir(filepath.Join(e.cacheDir, "results"))
	var files []string
	for _, en := range entries {
		if strings.Contains(en.Name(), id) {
			files = append(files, en.Name())
		}
	}
	return files
}

// natRulesFor counts the iptables nat rules portmap made for container id.
func natRulesFor(t *testing.T, id string) int {
	t.Helper()
	return strings.Count(run(t, "iptables-save", "-t", "nat"), id)
}

func (e *cniEnv) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	e.t.Cleanup(cancel)
	return ctx
}

// assertReleased checks that nothing of pod is left: no IP, no cached
// result, no port-forward rule.
func (e *cniEnv) assertReleased(pod Pod, ip string) {
	e.t.Helper()
	for _, r := range e.reservedIPs() {
		if r == ip {
			e.t.Errorf("host-local still reserves %s", ip)
		}
	}
	if files := e.cachedFiles(pod.ID); len(files) > 0 {
		e.t.Errorf("libcni cache still holds %v", files)
	}
	if n := natRulesFor(e.t, pod.ID); n > 0 {
		e.t.Errorf("%d iptables nat rules still mention the sandbox", n)
	}
}

func TestIntegrationStatus(t *testing.T) {
	e := newCNIEnv(t)
	err := e.m.Status()
	if err == nil || err.Error() != "no network config found in "+e.confDir {
		t.Fatalf("Status() with an empty conf dir = %v", err)
	}
	e.writeConf("05-missing.conflist", `{"cniVersion":"1.0.0","name":"missing","plugins":[{"type":"no-such-plugin"}]}`)
	if err := e.m.Status(); err == nil || !strings.Contains(err.Error(), "05-missing.conflist") {
		t.Fatalf("Status() with a config whose plugin is missing = %v", err)
	}
	e.writeConf("10-test.conflist", e.conflist())
	if err := e.m.Status(); err != nil {
		t.Fatalf("Status() with a valid config = %v", err)
	}
}

func TestIntegrationSetUpAndTearDown(t *testing.T) {
	e := newCNIEnv(t)
	e.writeConf("10-test.conflist", e.conflist())
	nsName, nsPath := e.newNetNS()
	pod := e.newPod(nsPath)
	pod.PortMappings = []PortMapping{
		{HostPort: 31080, ContainerPort: 80, Protocol: "TCP", HostIP: e.gateway},
		{ContainerPort: 81, Protocol: "tcp"},
	}
	ctx := e.ctx()

	res, err := e.m.SetUpPod(ctx, pod)
	if err != nil {
		t.Fatalf("SetUpPod: %v", err)
	}
	if res.Interface != "eth0" || len(res.IPs) != 1 || !e.subnet.Contains(net.ParseIP(res.IPs[0])) {
		t.Fatalf("SetUpPod = %+v, want one IP of %s on eth0", res, e.subnet)
	}
	ip := res.IPs[0]
	if addrs := run(t, "ip", "-n", nsName, "-o", "-4", "addr", "show", "dev", "eth0"); !strings.Contains(addrs, " "+ip+"/24 ") {
		t.Errorf("eth0 in the netns lacks %s: %s", ip, addrs)
	}
	if lo := run(t, "ip", "-n", nsName, "-o", "link", "show", "dev", "lo"); !strings.Contains(lo, "UP") {
		t.Errorf("lo is not up: %s", lo)
	}
	if got := e.reservedIPs(); len(got) != 1 || got[0] != ip {
		t.Errorf("host-local reserves %v, want [%s]", got, ip)
	}
	if n := natRulesFor(t, pod.ID); n == 0 {
		t.Error("portmap made no iptables rule for the host port")
	}

	if err := e.m.TearDownPod(ctx, pod); err != nil {
		t.Fatalf("TearDownPod: %v", err)
	}
	e.assertReleased(pod, ip)
	if out, err := exec.Command("ip", "-n", nsName, "link", "show", "eth0").CombinedOutput(); err == nil {
		t.Errorf("eth0 still exists after teardown: %s", out)
	}
	// DEL is idempotent.
	if err := e.m.TearDownPod(ctx, pod); err != nil {
		t.Fatalf("second TearDownPod: %v", err)
	}
}

func TestIntegrationTearDownFromCacheAfterNetNSGone(t *testing.T) {
	e := newCNIEnv(t)
	e.writeConf("10-test.conflist", e.conflist())
	nsName, nsPath := e.newNetNS()
	pod := e.newPod(nsPath)
	pod.PortMappings = []PortMapping{{HostPort: 31081, ContainerPort: 80, Protocol: "udp", HostIP: e.gateway}}
	ctx := e.ctx()

	res, err := e.m.SetUpPod(ctx, pod)
	if err != nil {
		t.Fatalf("SetUpPod: %v", err)
	}
	// The sandbox is gone and the configuration was removed meanwhile.
	e.delNetNS(nsName)
	if err := os.Remove(filepath.Join(e.confDir, "10-test.conflist")); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Status(); err == nil {
		t.Fatal("Status() is nil after the config was removed")
	}
	pod.NetNS = ""
	pod.PortMappings = nil // the cache must supply them
	if err := e.m.TearDownPod(ctx, pod); err != nil {
		t.Fatalf("TearDownPod without netns and config: %v", err)
	}
	e.assertReleased(pod, res.IPs[0])
}

func TestIntegrationTearDownNeverSetUp(t *testing.T) {
	e := newCNIEnv(t)
	ctx := e.ctx()
	// Neither config nor cache.
	if err := e.m.TearDownPod(ctx, e.newPod("")); err != nil {
		t.Fatalf("TearDownPod with nothing configured: %v", err)
	}
	e.writeConf("10-test.conflist", e.conflist())
	_, nsPath := e.newNetNS()
	for _, netns := range []string{"", nsPath} {
		if err := e.m.TearDownPod(ctx, e.newPod(netns)); err != nil {
			t.Errorf("TearDownPod of a pod never set up (netns %q): %v", netns, err)
		}
	}
}

func TestIntegrationFailedAddLeavesNothing(t *testing.T) {
	e := newCNIEnv(t)
	// tuning runs after bridge + host-local have reserved an IP and fails on
	// a sysctl that does not exist.
	e.writeConf("10-test.conflist", e.conflist(`{"type":"tuning","sysctl":{"net.ipv4.conf.eth0.no_such_sysctl":"1"}}`))
	if err := e.m.Status(); err != nil {
		t.Fatalf("Status: %v", err)
	}
	nsName, nsPath := e.newNetNS()
	pod := e.newPod(nsPath)
	pod.PortMappings = []PortMapping{{HostPort: 31082, ContainerPort: 80, HostIP: e.gateway}}

	_, err := e.m.SetUpPod(e.ctx(), pod)
	if err == nil {
		t.Fatal("SetUpPod succeeded with a failing plugin")
	}
	if !strings.Contains(err.Error(), "tuning") {
		t.Errorf("error %q does not name the failing plugin", err)
	}
	if got := e.reservedIPs(); len(got) != 0 {
		t.Errorf("host-local still reserves %v after the failed ADD", got)
	}
	if files := e.cachedFiles(pod.ID); len(files) > 0 {
		t.Errorf("libcni cache holds %v after the failed ADD", files)
	}
	if out, err := exec.Command("ip", "-n", nsName, "link", "show", "eth0").CombinedOutput(); err == nil {
		t.Errorf("eth0 left behind after the failed ADD: %s", out)
	}
}

func TestIntegrationConcurrentSetUp(t *testing.T) {
	e := newCNIEnv(t)
	e.writeConf("10-test.conflist", e.conflist())
	const n = 5
	pods := make([]Pod, n)
	for i := range pods {
		_, nsPath := e.newNetNS()
		pods[i] = e.newPod(nsPath)
	}
	ctx := e.ctx()
	ips := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.m.SetUpPod(ctx, pods[i])
			if err == nil {
				ips[i] = res.IPs[0]
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i, err := range errs {
		if err != nil {
			t.Errorf("SetUpPod %d: %v", i, err)
			continue
		}
		if seen[ips[i]] || !e.subnet.Contains(net.ParseIP(ips[i])) {
			t.Errorf("pod %d got %s: duplicate or outside %s", i, ips[i], e.subnet)
		}
		seen[ips[i]] = true
	}
	if got := e.reservedIPs(); len(got) != n {
		t.Errorf("host-local reserves %d IPs, want %d", len(got), n)
	}

	for i := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.m.TearDownPod(ctx, pods[i])
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("TearDownPod %d: %v", i, err)
		}
	}
	if got := e.reservedIPs(); len(got) != 0 {
		t.Errorf("host-local still reserves %v", got)
	}
	if n := e.m.locks.size(); n != 0 {
		t.Errorf("%d sandbox locks left", n)
	}
}

func TestIntegrationSingleConfVersion040(t *testing.T) {
	e := newCNIEnv(t)
	e.writeConf("10-test.conf", fmt.Sprintf(`{"cniVersion":"0.4.0","name":%q,"type":"bridge","bridge":%q,"isGateway":true,`+
		`"ipam":{"type":"host-local","dataDir":%q,"subnet":%q}}`, e.network, e.bridge, e.dataDir, e.subnet.String()))
	nsName, nsPath := e.newNetNS()
	pod := e.newPod(nsPath)
	ctx := e.ctx()
	res, err := e.m.SetUpPod(ctx, pod)
	if err != nil {
		t.Fatalf("SetUpPod: %v", err)
	}
	if len(res.IPs) != 1 || !e.subnet.Contains(net.ParseIP(res.IPs[0])) {
		t.Fatalf("SetUpPod = %+v, want one IP of %s", res, e.subnet)
	}
	e.delNetNS(nsName)
	pod.NetNS = ""
	if err := e.m.TearDownPod(ctx, pod); err != nil {
		t.Fatalf("TearDownPod: %v", err)
	}
	e.assertReleased(pod, res.IPs[0])
}
