//go:build linux

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// faultPluginType is the CNI plugin type of the fault-injecting plugin: the
// test binary itself, symlinked under this name into a private CNI bin dir
// (TestMain runs runFaultPlugin when invoked so).
const faultPluginType = "e2e-fault"

// Modes of the fault plugin's ADD, read from its modeFile on each call.
const (
	faultFail = "fail" // ADD errors
	faultHang = "hang" // ADD blocks until killed (bounded by faultHangMax)
	faultPass = "pass" // ADD passes the previous plugin's result through
)

// faultHangMax bounds a hanging ADD if nobody kills it.
const faultHangMax = 3 * time.Minute

// invokedAsFaultPlugin reports whether the test binary was run by libcni as
// the fault plugin.
func invokedAsFaultPlugin() bool {
	return filepath.Base(os.Args[0]) == faultPluginType && os.Getenv("CNI_COMMAND") != ""
}

// runFaultPlugin is the fault plugin: ADD appends a line to <modeFile>.log and
// fails, hangs or passes the previous result through as the mode file says;
// DEL, CHECK, GC and STATUS succeed.
func runFaultPlugin() int {
	in, _ := io.ReadAll(os.Stdin)
	var conf struct {
		CNIVersion string          `json:"cniVersion"`
		ModeFile   string          `json:"modeFile"`
		PrevResult json.RawMessage `json:"prevResult"`
	}
	if err := json.Unmarshal(in, &conf); err != nil && os.Getenv("CNI_COMMAND") != "VERSION" {
		fmt.Printf(`{"cniVersion":"1.0.0","code":6,"msg":"decode config: %v"}`, err)
		return 1
	}
	switch os.Getenv("CNI_COMMAND") {
	case "VERSION":
		fmt.Print(`{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0","1.1.0"]}`)
		return 0
	case "ADD":
		mode, _ := os.ReadFile(conf.ModeFile)
		if f, err := os.OpenFile(conf.ModeFile+".log", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintf(f, "ADD %s %s %s\n", strings.TrimSpace(string(mode)), os.Getenv("CNI_CONTAINERID"), time.Now().Format(time.RFC3339Nano))
			_ = f.Close()
		}
		switch strings.TrimSpace(string(mode)) {
		case faultFail:
			fmt.Printf(`{"cniVersion":%q,"code":11,"msg":"injected ADD failure"}`, conf.CNIVersion)
			return 1
		case faultHang:
			time.Sleep(faultHangMax)
			return 1
		}
		_, _ = os.Stdout.Write(conf.PrevResult)
		return 0
	}
	return 0
}

// faultNetwork replaces the node's CNI config by bridge + host-local followed
// by the fault plugin, in mode, and returns the mode file.
func (n *node) faultNetwork(mode string) string {
	n.t.Helper()
	bin := filepath.Join(n.dir, "cnibin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		n.t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		n.t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(bin, faultPluginType)); err != nil {
		n.t.Fatal(err)
	}
	modeFile := filepath.Join(n.dir, "fault-mode")
	n.setFault(modeFile, mode)
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"plugins":[{"type":"bridge","bridge":%q,"isGateway":true,"ipMasq":false,
  "ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"%s.0/24"}]]}},{"type":%q,"modeFile":%q}]}`,
		cniNetwork, n.bridge, n.ipamDir, n.subnet, faultPluginType, modeFile)
	if err := os.WriteFile(filepath.Join(n.cniConf, "10-e2e.conflist"), []byte(conf), 0o644); err != nil {
		n.t.Fatal(err)
	}
	n.extra = append(n.extra, "--cni-bin-dir="+bin+","+cniBinDir)
	return modeFile
}

func (n *node) setFault(modeFile, mode string) {
	n.t.Helper()
	if err := os.WriteFile(modeFile, []byte(mode), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// faultAdds returns the ADD calls the fault plugin logged, per mode.
func faultAdds(modeFile string) map[string]int {
	b, _ := os.ReadFile(modeFile + ".log")
	out := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			out[f[1]]++
		}
	}
	return out
}

// waitFaultAdds waits until the plugin logged at least want ADD calls in mode.
func (n *node) waitFaultAdds(modeFile, mode string, want int, timeout time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for faultAdds(modeFile)[mode] < want {
		if time.Now().After(deadline) {
			n.t.Fatalf("fewer than %d ADD calls in mode %s within %s: %v", want, mode, timeout, faultAdds(modeFile))
		}
		if n.kubelet.exited() {
			n.t.Fatalf("kubelet exited: %v", n.kubelet.err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// faultPluginProcs lists processes still running the fault plugin of this node.
func (n *node) faultPluginProcs() []string {
	var out []string
	self := filepath.Join(n.dir, "cnibin", faultPluginType)
	for _, pid := range allPIDs() {
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && (strings.HasPrefix(string(cmd), self+"\x00") || string(cmd) == self) {
			out = append(out, fmt.Sprint(pid))
		}
	}
	return out
}

// A CNI ADD that fails, then one that hangs past the runtime request
// timeout: the pod is retried with back-off, the node stays healthy, and
// once the network works the pod runs with exactly one sandbox, one IP and
// one checkpoint (every failed attempt rolled back, the hung plugin killed).
func TestIntegrationDockerModeCNIAddFailures(t *testing.T) {
	n := newNode(t)
	modeFile := n.faultNetwork(faultFail)
	n.extra = append(n.extra, "--runtime-request-timeout=10s")
	n.start()
	n.writeManifest("cnifault.yaml", manifest("cnifault", `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sleep", "3600"]
`))
	start := time.Now()
	n.waitFaultAdds(modeFile, faultFail, 3, 90*time.Second)
	failing := time.Since(start)
	p := n.waitPod("cnifault", 10*time.Second, "pending while the network fails", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodPending })
	if cs := containerStatus(p, "app"); cs == nil || cs.State.Waiting == nil || cs.State.Waiting.Reason != "ContainerCreating" {
		t.Errorf("container status while the network fails: %+v, want waiting ContainerCreating", cs)
	}
	// Three attempts take the back-off's time, not a hot loop.
	adds := faultAdds(modeFile)[faultFail]
	t.Logf("%d failed ADD calls in %s", adds, failing.Round(time.Millisecond))
	if perSecond := float64(adds) / time.Since(start).Seconds(); perSecond > 1 {
		t.Errorf("%d ADD attempts in %s: retried without back-off", adds, time.Since(start))
	}
	if ips := n.reservedIPs(); len(ips) > 1 {
		t.Errorf("IPs held while every ADD fails: %v (failed attempts leak)", ips)
	}

	n.setFault(modeFile, faultHang)
	n.waitFaultAdds(modeFile, faultHang, 1, 90*time.Second)
	// The hung ADD is bounded by --runtime-request-timeout; meanwhile the
	// node answers healthy.
	time.Sleep(12 * time.Second)
	if body, code, err := n.get("/healthz"); err != nil || code != 200 || body != "ok" {
		t.Errorf("/healthz while a CNI ADD hangs: %d %q %v", code, body, err)
	}

	n.setFault(modeFile, faultPass)
	p = n.waitPod("cnifault", 3*time.Minute, "running once the network works", runningAndReady)
	uid := "io.kubernetes.pod.uid=" + string(p.UID)
	// Converged: the failed attempts' sandboxes are gone, one is left.
	n.waitContainers(60*time.Second, "exactly one sandbox of the pod", true, func(ids []string) bool { return len(ids) == 1 },
		uid, "io.kubernetes.docker.type=podsandbox")
	deadline := time.Now().Add(60 * time.Second)
	for {
		ips, cps, procs := n.reservedIPs(), n.checkpoints(), n.faultPluginProcs()
		if len(ips) == 1 && len(cps) == 1 && len(procs) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after convergence: IPs %v, checkpoints %v, fault plugin processes %v; want one IP, one checkpoint, no plugin left",
				ips, cps, procs)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("ADD calls by mode: %v", faultAdds(modeFile))
}

// checkpoints lists the shim's sandbox checkpoint files.
func (n *node) checkpoints() []string {
	entries, _ := os.ReadDir(filepath.Join(n.shimRoot, "sandbox"))
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
