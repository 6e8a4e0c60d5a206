package installtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/nodecontainer"
)

const (
	kubeadmNodeName = "kubeadm-node"
	// nodeCheckout is where the test puts the checkout's files install.sh
	// uses (scripts/, systemd/, configs/), as an operator's clone.
	nodeCheckout = "/root/kubelet-dockershim"
	// nodeKubeletBin is this kubelet, built on the host: the node has no Go,
	// so install.sh gets it as KDS_KUBELET_BIN.
	nodeKubeletBin = "/root/kubelet"
	nodePauseImage = "registry.k8s.io/pause:3.10"
	nodeBusybox    = "kubelet-dockershim/busybox:latest"
)

// TestIntegrationInstallOnKubeadmNodeContainer installs this kubelet with
// scripts/install.sh, run as the README says, on a kubeadm node with the
// systemd cgroup driver in a node container (systemd 252 as PID 1, its
// dockerd with the systemd driver, cgroup v1), for each place kubeadm names
// cri-dockerd's socket in:
//  1. the node runs upstream's kubelet.service (kubeadm's 10-kubeadm.conf
//     drop-in, its config.yaml with cgroupDriver: systemd, kubeadm-flags.env,
//     kubelet.conf) and cri-dockerd's socket and service, all enabled and
//     active;
//  2. after install.sh, kubelet.service is active with this kubelet, our
//     unit, kubeadm's drop-in and kubeadm's flags; the endpoint names the
//     dockershim's socket, where the shim listens; config.yaml is otherwise
//     kept (cgroupDriver: systemd included); the node gets no CNI config;
//     cri-dockerd's units are stopped and disabled;
//  3. the kubelet takes the systemd driver from Docker, and a Burstable
//     static pod gets
//     kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice
//     below the node's systemd, with its memory limit and cpu shares;
//  4. install.sh run again (as after a `kubeadm upgrade`) restarts the
//     kubelet, and the pod keeps its container (same ID and start, no
//     restart) and its slice;
//  5. install.sh --rollback brings back upstream's kubelet.service, kubeadm's
//     files and cri-dockerd's units, enabled and active; the pod's container
//     runs on.
//
// The node's API server does not answer (see nodePKI): the pods are static
// ones. On failure the journals of kubelet.service and cri-docker.service
// are logged.
func TestIntegrationInstallOnKubeadmNodeContainer(t *testing.T) {
	const (
		criDockerd = "unix:///var/run/cri-dockerd.sock"
		shim       = "unix:///var/run/dockershim.sock"
	)
	bin := kubeletBinary(t)
	endpointIn := func(s, endpoint string) string {
		return strings.Replace(s, `containerRuntimeEndpoint: ""`, "containerRuntimeEndpoint: "+endpoint, 1)
	}
	for _, tc := range []struct {
		desc string
		// kubeadm is kubeadm's files under /var/lib/kubelet before install;
		// migrated are those install.sh rewrites, as rewritten.
		kubeadm, migrated map[string]string
	}{
		{
			desc: "kubeadm-flags.env names cri-dockerd's socket",
			kubeadm: map[string]string{
				"config.yaml":       nodeConfigYAML,
				"kubeadm-flags.env": `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=` + criDockerd + `"` + "\n",
			},
			migrated: map[string]string{
				"kubeadm-flags.env": `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=` + shim + `"` + "\n",
			},
		},
		{
			desc: "NodeLocalCRISocket (kubeadm 1.34+): config.yaml and instance-config.yaml name it",
			kubeadm: map[string]string{
				"config.yaml":          endpointIn(nodeConfigYAML, criDockerd),
				"instance-config.yaml": instanceConfig + "containerRuntimeEndpoint: " + criDockerd + "\n",
				"kubeadm-flags.env":    `KUBELET_KUBEADM_ARGS=""` + "\n",
			},
			migrated: map[string]string{
				"config.yaml":          endpointIn(nodeConfigYAML, shim),
				"instance-config.yaml": instanceConfig + "containerRuntimeEndpoint: " + shim + "\n",
			},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			k := startKubeadmNode(t, bin, tc.kubeadm)
			k.sh(t, "systemctl enable --now cri-docker.socket cri-docker.service kubelet.service")
			for _, u := range []string{"kubelet.service", "cri-docker.socket", "cri-docker.service"} {
				if got := k.sh(t, "systemctl is-active "+u+" || true"); got != "active" {
					t.Fatalf("before install.sh: %s is %s", u, got)
				}
			}
			k.install(t)
			k.checkService(t)
			k.checkKubeadmFiles(t, tc.kubeadm, tc.migrated)
			k.checkRestartKeepsPod(t)
			k.rollback(t, tc.kubeadm)
		})
	}
}

// checkRestartKeepsPod waits for this kubelet to run the static pod in its
// slice, runs install.sh again, which restarts the kubelet, and checks that
// the pod keeps its container and slice.
func (k *kubeadmNode) checkRestartKeepsPod(t *testing.T) {
	t.Helper()
	k.waitDriverFromRuntime(t)
	before := k.waitRunning(t, "burst", 2*time.Minute)
	k.checkSlice(t, "after install.sh", before)
	started := k.sh(t, "docker inspect -f '{{.State.StartedAt}}' "+before.containerID)
	containers := k.sh(t, "docker ps -aq --no-trunc --filter label=io.kubernetes.pod.uid="+before.uid+" | sort")

	pid := k.sh(t, "systemctl show -p MainPID --value kubelet.service")
	k.install(t)
	if got := k.sh(t, "systemctl show -p MainPID --value kubelet.service"); got == pid {
		t.Fatalf("the second install.sh did not restart kubelet.service (main PID %s)", pid)
	}
	k.checkService(t)
	k.waitDriverFromRuntime(t)
	after := k.waitRunning(t, "burst", time.Minute)
	// A kubelet that would replace the container does so in its first
	// syncs: give it some.
	time.Sleep(10 * time.Second)
	if after.uid != before.uid || after.containerID != before.containerID || after.restarts != 0 {
		t.Errorf("the pod did not keep its container: before uid %s container %s; after uid %s container %s, %d restarts",
			before.uid, before.containerID, after.uid, after.containerID, after.restarts)
	}
	if got := k.sh(t, "docker inspect -f '{{.State.StartedAt}} {{.State.Running}}' "+after.containerID); got != started+" true" {
		t.Errorf("the pod's container restarted: started %s, now %s", started, got)
	}
	if got := k.sh(t, "docker ps -aq --no-trunc --filter label=io.kubernetes.pod.uid="+before.uid+" | sort"); got != containers {
		t.Errorf("the pod's containers changed:\nbefore %s\nafter  %s", containers, got)
	}
	k.checkSlice(t, "after the kubelet's restart", after)
	k.containerID = after.containerID
}

// kubeadmNode is the node container of the test.
type kubeadmNode struct {
	n *nodecontainer.Node
	// bin is this kubelet on the host.
	bin string
	// memory and cpu are systemd's cgroup in the host's v1 hierarchies.
	memory, cpu string
	// containerID is the static pod's container, once it runs.
	containerID string
}

// startKubeadmNode starts the node container with a kubeadm node's files
// (kubeadm's under /var/lib/kubelet by name), stand-ins for upstream's
// kubelet and cri-dockerd, this kubelet (bin) and the checkout's files.
func startKubeadmNode(t *testing.T, bin string, kubeadm map[string]string) *kubeadmNode {
	t.Helper()
	files := map[string]string{
		"/usr/lib/systemd/system/kubelet.service":                   upstreamUnit,
		"/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf": kubeadmDropIn,
		"/usr/lib/systemd/system/cri-docker.service":                nodeCRIDockerService,
		"/usr/lib/systemd/system/cri-docker.socket":                 nodeCRIDockerSocket,
		"/etc/default/kubelet":                                      nodeDefaultKubelet,
		"/etc/kubernetes/manifests/burst.yaml":                      burstablePod("burst"),
	}
	for name, content := range kubeadm {
		files["/var/lib/kubelet/"+name] = content
	}
	for p, content := range nodePKI(t, kubeadmNodeName) {
		files[p] = content
	}
	dir := t.TempDir()
	bins := map[string]string{
		"/usr/bin/kubelet":     writeHostFile(t, dir, "upstream-kubelet", nodeUpstreamKubelet, 0o755),
		"/usr/bin/cri-dockerd": writeHostFile(t, dir, "cri-dockerd", nodeCRIDockerd, 0o755),
		nodeKubeletBin:         bin,
	}
	for p, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".pem") || strings.HasSuffix(p, ".conf") && strings.HasPrefix(p, "/etc/kubernetes/") {
			mode = 0o600
		}
		bins[p] = writeHostFile(t, dir, strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "_"), content, mode)
	}
	repo := moduleRoot(t)
	for _, p := range []string{"scripts/install.sh", "scripts/lib.sh", "systemd", "configs"} {
		bins[nodeCheckout+"/"+p] = filepath.Join(repo, p)
	}
	n := nodecontainer.Start(t, nodecontainer.Options{Name: kubeadmNodeName, Binaries: bins, Images: []string{nodePauseImage, nodeBusybox}})
	k := &kubeadmNode{n: n, bin: bin, memory: "/sys/fs/cgroup/memory" + n.Cgroup(t, "memory"), cpu: "/sys/fs/cgroup/cpu" + n.Cgroup(t, "cpu")}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, u := range []string{"kubelet", "cri-docker"} {
			out, _ := n.Exec(t, "journalctl", "-u", u, "--no-pager", "-n", "100")
			t.Logf("journalctl -u %s:\n%s", u, out)
		}
	})
	return k
}

// install runs install.sh in the node from the checkout, as root, as the
// README says for a kubeadm node.
func (k *kubeadmNode) install(t *testing.T) {
	t.Helper()
	out := k.sh(t, "cd "+nodeCheckout+" && KDS_KUBELET_BIN="+nodeKubeletBin+" ./scripts/install.sh 2>&1")
	t.Logf("install.sh:\n%s", out)
}

// sh runs script with bash in the node and returns its trimmed output; an
// error fails the test.
func (k *kubeadmNode) sh(t *testing.T, script string) string {
	t.Helper()
	out, err := k.n.Exec(t, "bash", "-c", script)
	if err != nil {
		t.Fatalf("in the node: %s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(out)
}

// podState is what the kubelet's /pods says of a static pod's container.
type podState struct {
	uid, containerID string
	restarts         int32
}

// waitRunning polls the kubelet's read-only /pods until the static pod name
// runs its container.
func (k *kubeadmNode) waitRunning(t *testing.T, name string, timeout time.Duration) podState {
	t.Helper()
	full := name + "-" + kubeadmNodeName
	var last string
	deadline := time.Now().Add(timeout)
	for {
		pods, err := k.pods()
		if err != nil {
			last = err.Error()
		} else if p, ok := pods[full]; !ok {
			last = "no pod " + full
		} else if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil {
			last = fmt.Sprintf("%s: phase %s, containers %+v", full, p.Status.Phase, cs)
		} else {
			return podState{uid: string(p.UID), containerID: strings.TrimPrefix(cs[0].ContainerID, "docker://"), restarts: cs[0].RestartCount}
		}
		if state, _ := k.n.Exec(t, "systemctl", "is-failed", "kubelet.service"); strings.TrimSpace(state) == "failed" {
			t.Fatalf("kubelet.service failed while waiting for %s: %s", full, last)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the static pod %s does not run within %v: %s", full, timeout, last)
		}
		time.Sleep(time.Second)
	}
}

// pods reads the kubelet's read-only /pods (port 10255, set in
// /etc/default/kubelet), by pod name.
func (k *kubeadmNode) pods() (map[string]v1.Pod, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + k.n.IP + ":10255/pods")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/pods: %s: %s", resp.Status, body)
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("/pods: %w", err)
	}
	pods := map[string]v1.Pod{}
	for _, p := range list.Items {
		pods[p.Name] = p
	}
	return pods, nil
}

// checkSlice checks the pod's slice where the systemd driver puts a
// Burstable pod, below the node's systemd: its memory limit and cpu shares,
// and the container's scope below it.
func (k *kubeadmNode) checkSlice(t *testing.T, who string, p podState) {
	t.Helper()
	slice := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(p.uid, "-", "_") + ".slice"
	for _, c := range []struct{ file, want string }{
		{filepath.Join(k.memory, slice, "memory.limit_in_bytes"), strconv.Itoa(64 << 20)},
		{filepath.Join(k.cpu, slice, "cpu.shares"), "102"},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Errorf("%s: the pod's slice: %v", who, err)
			continue
		}
		if got := strings.TrimSpace(string(b)); got != c.want {
			t.Errorf("%s: %s = %s, want %s", who, c.file, got, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(k.memory, slice, "docker-"+p.containerID+".scope")); err != nil {
		t.Errorf("%s: the container's scope is not below its pod's slice: %v", who, err)
	}
	t.Logf("%s: %s has memory.limit_in_bytes 64Mi, cpu.shares 102 and docker-%.12s.scope", who, slice, p.containerID)
}

// checkService checks kubelet.service after install.sh: active, our unit
// with kubeadm's drop-in, this kubelet as its main process with the flags of
// kubeadm's files, cri-dockerd's units stopped and disabled.
func (k *kubeadmNode) checkService(t *testing.T) {
	t.Helper()
	if got := k.sh(t, "systemctl is-active kubelet.service || true"); got != "active" {
		t.Fatalf("kubelet.service is %s after install.sh", got)
	}
	show := k.sh(t, "systemctl show -p FragmentPath -p DropInPaths -p MainPID kubelet.service")
	for _, want := range []string{"FragmentPath=/etc/systemd/system/kubelet.service", "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"} {
		if !strings.Contains(show, want) {
			t.Errorf("kubelet.service: no %s in\n%s", want, show)
		}
	}
	if got, want := k.sh(t, "sha256sum </proc/$(systemctl show -p MainPID --value kubelet.service)/exe | cut -d' ' -f1"), fileHash(t, k.bin); got != want {
		t.Errorf("kubelet.service's main process is not this kubelet (sha256 %s, want %s)", got, want)
	}
	cmdline := k.sh(t, "tr '\\0' ' ' </proc/$(systemctl show -p MainPID --value kubelet.service)/cmdline")
	for _, want := range []string{"--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml", "--read-only-port=10255"} {
		if !strings.Contains(cmdline, want) {
			t.Errorf("the kubelet's command line has no %s: %s", want, cmdline)
		}
	}
	if strings.Contains(cmdline, "cri-dockerd") {
		t.Errorf("the kubelet's command line names cri-dockerd: %s", cmdline)
	}
	for _, u := range []string{"cri-docker.socket", "cri-docker.service"} {
		if got := k.sh(t, "echo $(systemctl is-active "+u+"; systemctl is-enabled "+u+")"); got != "inactive disabled" {
			t.Errorf("%s is %q after install.sh, want inactive and disabled", u, got)
		}
	}
}

// checkKubeadmFiles checks kubeadm's files after install.sh: those in
// migrated are rewritten, the others (config.yaml, with cgroupDriver:
// systemd, when it names no endpoint) are as they were. The shim listens on
// its socket. The node's pod network is left to the cluster: no CNI config.
func (k *kubeadmNode) checkKubeadmFiles(t *testing.T, kubeadm, migrated map[string]string) {
	t.Helper()
	for _, name := range []string{"config.yaml", "kubeadm-flags.env", "instance-config.yaml"} {
		want, ok := migrated[name]
		if !ok {
			want = kubeadm[name]
		}
		if got := k.sh(t, "cat /var/lib/kubelet/"+name+" 2>/dev/null || true"); got != strings.TrimSpace(want) {
			t.Errorf("/var/lib/kubelet/%s after install.sh:\n%s\nwant\n%s", name, got, want)
		}
	}
	if got := k.sh(t, "test -S /var/run/dockershim.sock && echo yes || echo no"); got != "yes" {
		t.Errorf("the dockershim does not listen on /var/run/dockershim.sock")
	}
	if got := k.sh(t, "ls /etc/cni/net.d 2>/dev/null || true"); got != "" {
		t.Errorf("install.sh put a CNI config on the kubeadm node: %s", got)
	}
}

// waitDriverFromRuntime waits for the log line of kubelet.service's main
// process (this kubelet's, not upstream's before it) saying it took the
// cgroup driver from the runtime, and checks that it took systemd and that
// config.yaml's cgroupDriver (what /configz would show; kubeadm's config
// lets no anonymous caller read it) reached it as systemd too.
func (k *kubeadmNode) waitDriverFromRuntime(t *testing.T) {
	t.Helper()
	const msg = "Using cgroup driver setting received from the CRI runtime"
	var line string
	deadline := time.Now().Add(time.Minute)
	for line == "" {
		for _, l := range strings.Split(k.sh(t, "journalctl --no-pager -o cat _PID=$(systemctl show -p MainPID --value kubelet.service)"), "\n") {
			if strings.Contains(l, msg) {
				line = l
			}
		}
		if line == "" {
			if time.Now().After(deadline) {
				t.Fatalf("this kubelet did not log %q within a minute", msg)
			}
			time.Sleep(time.Second)
		}
	}
	if !strings.Contains(line, `"cgroupDriver": "systemd"`) || !strings.Contains(line, `"configured": "systemd"`) {
		t.Errorf("this kubelet did not take the systemd driver, or config.yaml's did not reach it: %s", line)
	}
	t.Logf("this kubelet: %s", line)
}

// rollback runs install.sh --rollback and checks that upstream's
// kubelet.service (its unit, binary and kubeadm's files) and cri-dockerd's
// units are back, enabled and active, and that the pod's container still
// runs.
func (k *kubeadmNode) rollback(t *testing.T, kubeadm map[string]string) {
	t.Helper()
	out := k.sh(t, "cd "+nodeCheckout+" && ./scripts/install.sh --rollback 2>&1")
	t.Logf("install.sh --rollback:\n%s", out)
	for _, u := range []string{"kubelet.service", "cri-docker.socket", "cri-docker.service"} {
		if got := k.sh(t, "echo $(systemctl is-active "+u+"; systemctl is-enabled "+u+")"); got != "active enabled" {
			t.Errorf("after --rollback %s is %q, want active and enabled", u, got)
		}
	}
	// Debian's /lib is /usr/lib: systemd may name either.
	if got := k.sh(t, "readlink -f $(systemctl show -p FragmentPath --value kubelet.service)"); got != "/usr/lib/systemd/system/kubelet.service" {
		t.Errorf("after --rollback kubelet.service is %s, want upstream's unit", got)
	}
	files := map[string]string{"/usr/bin/kubelet": nodeUpstreamKubelet}
	for name, content := range kubeadm {
		files["/var/lib/kubelet/"+name] = content
	}
	for p, want := range files {
		if got := k.sh(t, "cat "+p); got != strings.TrimSpace(want) {
			t.Errorf("after --rollback %s is\n%s\nwant\n%s", p, got, want)
		}
	}
	if got := k.sh(t, "docker inspect -f '{{.State.Running}}' "+k.containerID); got != "true" {
		t.Errorf("after --rollback the pod's container is not running")
	}
}

// writeHostFile writes content to dir/name and returns the path.
func writeHostFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	writeFile(t, p, content, mode)
	return p
}
