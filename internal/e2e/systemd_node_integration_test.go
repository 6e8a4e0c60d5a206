//go:build linux

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/cmdtest"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/nodecontainer"
)

// TestIntegrationSystemdNode runs this kubelet in a node container (systemd as
// PID 1, its own dockerd with the systemd cgroup driver, cgroup v1) as a
// standalone node with static pods, configured with the cgroupfs driver:
//   - it takes Docker's driver (systemd) from the runtime;
//   - kubepods.slice has the node's allocatable memory (capacity minus
//     --kube-reserved) as its limit;
//   - a Burstable pod's slice is where upstream puts it
//     (kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice,
//     below systemd's own cgroup) with upstream's cpu shares and memory limit,
//     and its container's scope (docker-<id>.scope) is below it;
//   - a container over its memory limit is reported OOMKilled;
//   - /metrics/cadvisor has the container's rows;
//   - the node log query (enableSystemLogQuery) reads the kubelet's journal.
func TestIntegrationSystemdNode(t *testing.T) {
	s := requireSuite(t)
	dir := t.TempDir()
	manifests := map[string]string{
		"burst.yaml": `apiVersion: v1
kind: Pod
metadata: {name: burst, namespace: default}
spec:
  hostNetwork: true
  containers:
  - name: main
    image: ` + busyboxImage + `
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resources: {requests: {cpu: 100m, memory: 32Mi}, limits: {memory: 64Mi}}
`,
		"oom.yaml": `apiVersion: v1
kind: Pod
metadata: {name: oom, namespace: default}
spec:
  hostNetwork: true
  restartPolicy: Never
  containers:
  - name: hog
    image: ` + busyboxImage + `
    imagePullPolicy: Never
    command: [sh, -c, "head -c 200m /dev/zero | tail"]
    resources: {limits: {memory: 16Mi}}
`,
	}
	bins := map[string]string{"/usr/local/bin/kubelet": s.bin}
	for name, body := range manifests {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		bins["/etc/kubernetes/manifests/"+name] = p
	}
	// The node log query, on the kubelet API open to anyone (inside the node
	// container only).
	config := filepath.Join(dir, "kubelet.yaml")
	if err := os.WriteFile(config, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
enableSystemLogQuery: true
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	bins["/etc/kubernetes/kubelet.yaml"] = config
	n := nodecontainer.Start(t, nodecontainer.Options{Name: "sdnode", Binaries: bins, Images: []string{pauseImage, busyboxImage}})
	if out, err := n.Exec(t, "systemd-run", "--unit=kubelet", "--", "/usr/local/bin/kubelet", "--config=/etc/kubernetes/kubelet.yaml",
		"--cgroup-driver=cgroupfs", "--pod-manifest-path=/etc/kubernetes/manifests", "--pod-infra-container-image="+pauseImage,
		"--read-only-port=10255", "--healthz-bind-address=0.0.0.0", "--kube-reserved=memory=100Mi",
		"--file-check-frequency=2s", "--fail-swap-on=false", "-v=2"); err != nil {
		t.Fatalf("start the kubelet in the node: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := n.Exec(t, "journalctl", "-u", "kubelet", "--no-pager", "-n", "80")
			t.Logf("the node's kubelet:\n%s", out)
		}
	})
	base := "http://" + n.IP
	get := func(port int, path string) (string, error) {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(base + ":" + strconv.Itoa(port) + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s: %s", path, resp.Status, b)
		}
		return string(b), err
	}
	waitUntil(t, 90*time.Second, "the node's kubelet is healthy", func() bool {
		body, err := get(10248, "/healthz")
		return err == nil && body == "ok"
	})
	if out, _ := n.Exec(t, "journalctl", "-u", "kubelet", "--no-pager"); !strings.Contains(out, `Using cgroup driver setting received from the CRI runtime`) ||
		!strings.Contains(out, `"cgroupDriver": "systemd"`) && !strings.Contains(out, `cgroupDriver=systemd`) && !strings.Contains(out, `"cgroupDriver":"systemd"`) {
		t.Errorf("the kubelet did not take Docker's systemd driver; its log:\n%s", cmdtest.LastLines(out, 30))
	}
	// Upstream's iptables util chains (makeIPTablesUtilChains defaults to
	// true), in the node's network namespace.
	for _, want := range []struct{ table, chain, rule string }{
		{"mangle", "KUBE-IPTABLES-HINT", "-N KUBE-IPTABLES-HINT"},
		{"filter", "KUBE-FIREWALL", `-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`},
		{"filter", "INPUT", "-A INPUT -j KUBE-FIREWALL"},
		{"filter", "OUTPUT", "-A OUTPUT -j KUBE-FIREWALL"},
		{"nat", "KUBE-KUBELET-CANARY", "-N KUBE-KUBELET-CANARY"},
	} {
		var out string
		var err error
		// The canary chains come from the loop that watches them.
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, err = n.Exec(t, "iptables", "-w", "5", "-t", want.table, "-S", want.chain)
			if err == nil && slices.Contains(strings.Split(strings.TrimSpace(out), "\n"), want.rule) || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil || !slices.Contains(strings.Split(strings.TrimSpace(out), "\n"), want.rule) {
			t.Errorf("iptables -t %s -S %s in the node: %v\n%s\nwant the line %s", want.table, want.chain, err, out, want.rule)
		}
	}

	pods := func() map[string]v1.Pod {
		body, err := get(10255, "/pods")
		if err != nil {
			return nil
		}
		var list v1.PodList
		if json.Unmarshal([]byte(body), &list) != nil {
			return nil
		}
		out := map[string]v1.Pod{}
		for _, p := range list.Items {
			out[p.Name] = p
		}
		return out
	}
	var burst v1.Pod
	waitUntil(t, 120*time.Second, "the burstable static pod runs", func() bool {
		p, ok := pods()["burst-sdnode"]
		burst = p
		return ok && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})

	under := n.Cgroup(t, "memory")
	memRoot := "/sys/fs/cgroup/memory" + under
	cpuRoot := "/sys/fs/cgroup/cpu" + under
	read := func(path string) string { t.Helper(); return readTrimmed(t, path) }
	slice := "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(string(burst.UID), "-", "_") + ".slice"
	if got := read(filepath.Join(memRoot, slice, "memory.limit_in_bytes")); got != strconv.Itoa(64<<20) {
		t.Errorf("%s memory.limit_in_bytes = %s, want 64Mi", slice, got)
	}
	if got := read(filepath.Join(cpuRoot, slice, "cpu.shares")); got != "102" {
		t.Errorf("%s cpu.shares = %s, want 102 (100m)", slice, got)
	}
	cid := strings.TrimPrefix(burst.Status.ContainerStatuses[0].ContainerID, "docker://")
	if _, err := os.Stat(filepath.Join(memRoot, slice, "docker-"+cid+".scope")); err != nil {
		t.Errorf("the container's scope is not below its pod's slice: %v", err)
	}
	var capacity uint64
	meminfo := read("/proc/meminfo")
	for _, l := range strings.Split(meminfo, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			capacity = kb * 1024
		}
	}
	if got, want := read(filepath.Join(memRoot, "kubepods.slice", "memory.limit_in_bytes")), capacity-100<<20; got != strconv.FormatUint(want, 10) {
		t.Errorf("kubepods.slice memory.limit_in_bytes = %s, want capacity - kube-reserved = %d", got, want)
	}

	t.Logf("node %s: systemd's cgroup %s; %s: memory.limit_in_bytes %s, cpu.shares %s; kubepods.slice memory.limit_in_bytes %s (capacity %d)",
		n.Name, under, slice, read(filepath.Join(memRoot, slice, "memory.limit_in_bytes")), read(filepath.Join(cpuRoot, slice, "cpu.shares")),
		read(filepath.Join(memRoot, "kubepods.slice", "memory.limit_in_bytes")), capacity)
	// The hog is killed within milliseconds of its start, before
	// containerd's shim watches its memory cgroup (one run in fifty under
	// load, Docker then says exit 137 without OOMKilled): the shim reads the
	// kill in the kernel log, which the node's kubelet can read (its OOM
	// watcher does not start otherwise).
	waitUntil(t, 90*time.Second, "the hog is OOM-killed", func() bool {
		p, ok := pods()["oom-sdnode"]
		if !ok || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term != nil && term.Reason != "OOMKilled" {
			t.Fatalf("the hog ended %+v, want OOMKilled", term)
		}
		return term != nil
	})

	waitUntil(t, 60*time.Second, "/metrics/cadvisor has the burstable container's rows", func() bool {
		body, err := get(10255, "/metrics/cadvisor")
		if err != nil {
			return false
		}
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, "container_memory_working_set_bytes{") && strings.Contains(l, `container="main"`) &&
				strings.Contains(l, `pod="burst-sdnode"`) && strings.Contains(l, "docker-"+cid+".scope") {
				return true
			}
		}
		return false
	})
	checkNodeLogQuery(t, n.IP)
}

// checkNodeLogQuery reads the kubelet's own journal through the node log
// query of the kubelet API (enableSystemLogQuery): journalctl with the
// pattern, in journalctl's short-precise format.
func checkNodeLogQuery(t *testing.T, ip string) {
	t.Helper()
	c := http.Client{Timeout: 35 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := "https://" + net.JoinHostPort(ip, "10250") + "/logs/?query=kubelet&pattern=sync%20loop"
	var body string
	waitUntil(t, 60*time.Second, "the node log query answers with the kubelet's journal", func() bool {
		resp, err := c.Get(url)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, "Starting the kubelet sync loop") && strings.Contains(body, " kubelet[")
	})
	if strings.Contains(body, "Using cgroup driver") {
		t.Errorf("the pattern did not filter the journal: %q", body)
	}
	resp, err := c.Get("https://" + net.JoinHostPort(ip, "10250") + "/logs/?query=kubelet%3Breboot")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotAcceptable {
		t.Errorf("a service name with ';': %s, want 406", resp.Status)
	}
}

// waitUntil polls cond every 500ms and fails the test when it is still false
// after timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestIntegrationSystemdNodeJoined joins this kubelet in a node container
// (systemd as PID 1, its own dockerd with the systemd driver, cgroup v1) to
// the control plane by TLS bootstrap (the node reaches the host's loopback
// through nodecontainer's relay), with the kubelet itself in kube.slice:
//   - kubeReservedCgroup /kube.slice with enforceNodeAllocatable
//     [pods, kube-reserved]: the slice's memory limit is kubeReserved, set
//     through systemd (its MemoryLimit property says so too);
//   - kubepods.slice's limit is capacity - kubeReserved;
//   - a BestEffort pod whose memory takes the pods below the
//     allocatableMemory.available threshold (upstream's copy of the hard
//     memory.available one) is evicted with upstream's reason and message,
//     the Burstable pod beside it is not, and the Node reports
//     MemoryPressure.
//
// The threshold is node-local: the node's pods cgroup, not the host's
// memory, decides.
func TestIntegrationSystemdNodeJoined(t *testing.T) {
	s := requireSuite(t)
	c := startCluster(t)
	ctx := context.Background()
	dir := t.TempDir()
	port, err := strconv.Atoi(c.APIServer[strings.LastIndex(c.APIServer, ":")+1:])
	if err != nil {
		t.Fatalf("API server %s: %v", c.APIServer, err)
	}
	var capacity int64
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(meminfo), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			capacity = kb * 1024
		}
	}
	// The pods get 1100Mi; eviction starts once less than 600Mi of it is left.
	const podsMemory = 1100 << 20
	kubeReserved := capacity - podsMemory
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
readOnlyPort: 10255
healthzBindAddress: 0.0.0.0
kubeReserved: {memory: "%d"}
kubeReservedCgroup: /kube.slice
enforceNodeAllocatable: [pods, kube-reserved]
evictionHard: {memory.available: 600Mi}
evictionPressureTransitionPeriod: 30s
failSwapOn: false
`, kubeReserved)
	files := map[string]string{
		"/usr/local/bin/kubelet":                 s.bin,
		"/etc/kubernetes/bootstrap-kubelet.conf": c.BootstrapKubeconfig,
		"/var/lib/kubelet/config.yaml":           writeTestFile(t, dir, "config.yaml", cfg),
		"/etc/cni/net.d/10-bridge.conflist": writeTestFile(t, dir, "cni.conflist", `{"cniVersion":"1.0.0","name":"nodenet","plugins":[`+
			`{"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.245.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},`+
			`{"type":"portmap","capabilities":{"portMappings":true}}]}`),
	}
	n := nodecontainer.Start(t, nodecontainer.Options{Name: "sdjoin", Binaries: files, Images: []string{pauseImage, busyboxImage},
		LoopbackPorts: []int{port}})
	// systemd makes a slice's directory only in the hierarchies it manages
	// for it (never cpuset on v1), and upstream's kubelet, as this one,
	// refuses a reserved cgroup missing from one of them: the slice is
	// made with accounting on and completed by hand, as kubeadm users do
	// (ExecStartPre=mkdir ...).
	under := n.Cgroup(t, "memory")
	if out, err := n.Exec(t, "sh", "-c", "systemctl set-property --runtime kube.slice CPUAccounting=yes MemoryAccounting=yes TasksAccounting=yes && "+
		"systemctl start kube.slice && for d in /sys/fs/cgroup/*/; do [ -d \"$d"+under+"\" ] && mkdir -p \"$d"+under+"/kube.slice\"; done; true"); err != nil {
		t.Fatalf("make kube.slice: %v: %s", err, out)
	}
	if out, err := n.Exec(t, "systemd-run", "--unit=kubelet", "--slice=kube.slice", "--", "/usr/local/bin/kubelet",
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml", "--pod-infra-container-image="+pauseImage, "--cni-bin-dir=/usr/lib/cni", "-v=2"); err != nil {
		t.Fatalf("start the kubelet in the node: %v: %s", err, out)
	}
	t.Cleanup(func() { c.DeleteNode(t, n.Name) })
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := n.Exec(t, "journalctl", "-u", "kubelet", "--no-pager", "-n", "80")
			t.Logf("the node's kubelet:\n%s", out)
		}
	})
	waitAPINodeReady(t, c, n.Name, 2*time.Minute)

	read := func(path string) string { t.Helper(); return readTrimmed(t, path) }
	memRoot := "/sys/fs/cgroup/memory" + under
	if got := read(filepath.Join(memRoot, "kube.slice", "memory.limit_in_bytes")); got != strconv.FormatInt(kubeReserved, 10) {
		t.Errorf("kube.slice memory.limit_in_bytes = %s, want kubeReserved %d", got, kubeReserved)
	}
	if out, _ := n.Exec(t, "systemctl", "show", "-p", "MemoryLimit", "--value", "kube.slice"); strings.TrimSpace(out) != strconv.FormatInt(kubeReserved, 10) {
		t.Errorf("systemd's MemoryLimit of kube.slice = %q, want %d (set through systemd, not behind its back)", strings.TrimSpace(out), kubeReserved)
	}
	if got := read(filepath.Join(memRoot, "kubepods.slice", "memory.limit_in_bytes")); got != strconv.Itoa(podsMemory) {
		t.Errorf("kubepods.slice memory.limit_in_bytes = %s, want capacity - kubeReserved = %d", got, podsMemory)
	}

	ns := "default"
	mk := func(name, cmd string, res v1.ResourceRequirements) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1.PodSpec{
			NodeName: n.Name, RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{Name: "main", Image: busyboxImage, ImagePullPolicy: v1.PullNever,
				Command: []string{"sh", "-c", cmd}, Resources: res}},
		}}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = c.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
		return p
	}
	mk("keep", "exec sleep 3600", v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")}, Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}})
	waitUntil(t, 2*time.Minute, "the burstable pod runs", func() bool {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "keep", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodRunning
	})
	mk("hog", "head -c 700m /dev/zero | tail; sleep 3600", v1.ResourceRequirements{})
	var hog *v1.Pod
	waitUntil(t, 3*time.Minute, "the memory hog is evicted", func() bool {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		hog = p
		return err == nil && p.Status.Phase == v1.PodFailed
	})
	checkMemoryEviction(t, c, n.Name, hog, "600Mi")
	if p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "keep", metav1.GetOptions{}); err != nil || p.Status.Phase != v1.PodRunning {
		t.Errorf("the burstable pod after the eviction: %v, %v; want Running", p.Status.Phase, err)
	}
	t.Logf("node %s: kube.slice limit %d, kubepods.slice %d; the hog: %s", n.Name, kubeReserved, podsMemory, hog.Status.Message)
}

// writeTestFile writes content to dir/name and returns its path.
func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// readTrimmed is the content of the file at path without surrounding space;
// the test fails when it cannot be read.
func readTrimmed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return strings.TrimSpace(string(b))
}

// waitAPINodeReady waits until Node name is Ready in c and returns it.
func waitAPINodeReady(t *testing.T, c *controlplane.Cluster, name string, timeout time.Duration) *v1.Node {
	t.Helper()
	var node *v1.Node
	waitUntil(t, timeout, "Node "+name+" is Ready", func() bool {
		got, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		node = got
		cond := nodeCondition(got, v1.NodeReady)
		return cond != nil && cond.Status == v1.ConditionTrue
	})
	return node
}

// checkMemoryEviction checks that pod was evicted for memory with
// upstream's reason and message (its container "main" named, the threshold
// quantity given), and that Node nodeName reports MemoryPressure.
func checkMemoryEviction(t *testing.T, c *controlplane.Cluster, nodeName string, pod *v1.Pod, threshold string) {
	t.Helper()
	want := "The node was low on resource: memory. Threshold quantity: " + threshold + ", available: "
	if pod.Status.Reason != "Evicted" || !strings.HasPrefix(pod.Status.Message, want) || !strings.Contains(pod.Status.Message, "Container main was using ") {
		t.Errorf("pod %s ended with reason %q, message %q; want Evicted, %q...", pod.Name, pod.Status.Reason, pod.Status.Message, want)
	}
	node, err := c.Client.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond := nodeCondition(node, v1.NodeMemoryPressure); cond == nil || cond.Status != v1.ConditionTrue {
		t.Errorf("Node %s after the eviction: MemoryPressure %+v, want True", nodeName, cond)
	}
}
