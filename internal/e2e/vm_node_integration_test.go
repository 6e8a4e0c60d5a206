//go:build linux && vm

package e2e

import (
	"context"
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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/cmdtest"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/vm"
)

// TestIntegrationVMNode joins this kubelet, in a Debian 13 VM (cgroup v2
// only, systemd as PID 1, Docker 26.1 with the systemd driver), to the
// control plane on the host by TLS bootstrap, and checks on the real cgroup
// v2 tree what a node must do (issue 28's "cgroup v2 VM" smoke):
//   - the cgroup driver is taken from Docker (systemd), the Node is Ready;
//   - kubepods.slice's memory.max is capacity - kube-reserved (node
//     allocatable enforced); Burstable and Guaranteed pods' slices are where
//     upstream puts them with upstream's cpu.weight, cpu.max and memory.max,
//     their containers' scopes below them;
//   - MemoryQoS (on by default in 1.37): the Burstable container's
//     memory.high is request + 0.9 * (limit - request), page-aligned;
//   - a container over its limit is reported OOMKilled (with Docker's
//     cgroupfs driver all its processes killed together: memory.oom.group
//     1, singleProcessOOMKill being false by default on cgroup v2);
//   - /metrics/cadvisor has the container's rows and /stats/summary its pod;
//   - an in-place resize reaches the pod slice's and the container scope's
//     cpu.max and memory.max;
//   - the static CPU manager (reservedSystemCPUs 0): a Guaranteed pod with
//     one whole CPU gets an exclusive CPU in its scope's cpuset.cpus, and
//     the shared pool's containers lose it;
//   - a BestEffort pod that takes the node below its memory.available
//     threshold is evicted with upstream's reason and message (the eviction
//     manager polls on cgroup v2, as upstream's does).
//
// Run by `make vm-test` (build tag vm; not in scripts/test.sh: the VM alone
// takes minutes under software emulation).
func TestIntegrationVMNode(t *testing.T) { testVMNode(t, "cg2", systemdLayout) }

// TestIntegrationVMNodeCgroupfs is TestIntegrationVMNode with Docker on the
// cgroupfs driver (its daemon.json changed and dockerd restarted before the
// kubelet starts), which the kubelet takes from it: the cgroupfs paths on
// cgroup v2 (kubepods/burstable/pod<uid>/<id>), MemoryQoS written into the
// files.
func TestIntegrationVMNodeCgroupfs(t *testing.T) { testVMNode(t, "cg2fs", cgroupfsLayout) }

// oomHog is the command of the pod run out of memory. With Docker's cgroupfs
// driver the shell would outlive the killed tail without the group kill
// (memory.oom.group 1, which the shim writes once the container runs: the hog
// waits for that); under the systemd driver systemd may have put the key
// back to 0, so there the shell ends with its pipeline.
func oomHog(layout cgLayout) string {
	if layout.driver == "cgroupfs" {
		return "sleep 5; head -c 300m /dev/zero | tail; exec sleep 3600"
	}
	return "head -c 300m /dev/zero | tail"
}

// cgLayout is where a cgroup driver puts the kubelet's and Docker's cgroups
// (paths below /sys/fs/cgroup).
type cgLayout struct {
	driver                   string
	kubepods, besteffort     string
	burstablePod, guaranteed func(uid string) string
	container                func(id string) string
}

var (
	systemdLayout = cgLayout{driver: "systemd", kubepods: "kubepods.slice", besteffort: "kubepods.slice/kubepods-besteffort.slice",
		burstablePod: func(uid string) string {
			return "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
		},
		guaranteed: func(uid string) string {
			return "kubepods.slice/kubepods-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
		},
		container: func(id string) string { return "docker-" + id + ".scope" }}
	cgroupfsLayout = cgLayout{driver: "cgroupfs", kubepods: "kubepods", besteffort: "kubepods/besteffort",
		burstablePod: func(uid string) string { return "kubepods/burstable/pod" + uid },
		guaranteed:   func(uid string) string { return "kubepods/pod" + uid },
		container:    func(id string) string { return id }}
)

func testVMNode(t *testing.T, name string, layout cgLayout) {
	s := requireSuite(t)
	c := startCluster(t)
	ctx := context.Background()
	dir := t.TempDir()

	// The VM reaches the host's 127.0.0.1:PORT at vm.HostAddr:PORT; the API
	// server's certificate names "kubernetes", not that address.
	boot, err := os.ReadFile(c.BootstrapKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	port := c.APIServer[strings.LastIndex(c.APIServer, ":")+1:]
	bootVM := strings.Replace(string(boot), "server: "+c.APIServer,
		"tls-server-name: kubernetes\n    server: https://"+vm.HostAddr+":"+port, 1)
	if bootVM == string(boot) {
		t.Fatalf("no %q in the bootstrap kubeconfig:\n%s", "server: "+c.APIServer, boot)
	}
	files := map[string]string{
		"/usr/local/bin/kubelet":                 s.bin,
		"/etc/kubernetes/bootstrap-kubelet.conf": writeTestFile(t, dir, "bootstrap.conf", bootVM),
		"/etc/cni/net.d/10-bridge.conflist": writeTestFile(t, dir, "cni.conflist", `{"cniVersion":"1.0.0","name":"vmnet","plugins":[`+
			`{"type":"bridge","bridge":"cni0","isGateway":true,"ipMasq":true,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.244.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},`+
			`{"type":"portmap","capabilities":{"portMappings":true}}]}`),
	}
	begin := time.Now()
	v := vm.Start(t, vm.Options{Name: name, CPUs: 3, Files: files, Images: []string{pauseImage, busyboxImage}, Forward: []int{10255}})
	t.Logf("VM up in %s, files and images in %s", v.BootTime.Round(time.Second), (time.Since(begin) - v.BootTime).Round(time.Second))
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := v.Exec(t, "journalctl", "-u", "kubelet", "--no-pager", "-n", "100")
			t.Logf("the VM's kubelet:\n%s", out)
		}
	})
	exec := func(args ...string) string {
		t.Helper()
		out, err := v.Exec(t, args...)
		if err != nil {
			t.Fatalf("%v (output %q)", err, out)
		}
		return strings.TrimSpace(out)
	}

	// memory.available's threshold: 400Mi below what is available now, so
	// that the kubelet and the small pods stay above it and a 700Mi hog
	// does not.
	var availKB int64
	for _, l := range strings.Split(exec("cat", "/proc/meminfo"), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemAvailable:" {
			availKB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	thresholdMi := availKB/1024 - 400
	if thresholdMi < 200 {
		t.Fatalf("the VM has %d KiB available: too little for the eviction check", availKB)
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}}
authorization: {mode: AlwaysAllow}
readOnlyPort: 10255
kubeReserved: {memory: 100Mi}
evictionHard: {memory.available: %dMi}
cpuManagerPolicy: static
reservedSystemCPUs: "0"
failSwapOn: false
`, thresholdMi)
	if layout.driver != "systemd" {
		exec("sh", "-c", `printf '{"exec-opts": ["native.cgroupdriver=`+layout.driver+`"]}\n' >/etc/docker/daemon.json && systemctl restart docker`)
	}
	if got := exec("docker", "info", "--format", "{{.CgroupDriver}}"); got != layout.driver {
		t.Fatalf("Docker's cgroup driver is %q, want %q", got, layout.driver)
	}
	v.Copy(t, writeTestFile(t, dir, "config.yaml", cfg), "/var/lib/kubelet/config.yaml")
	exec("systemd-run", "--unit=kubelet", "--", "/usr/local/bin/kubelet",
		"--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf", "--kubeconfig=/etc/kubernetes/kubelet.conf",
		"--config=/var/lib/kubelet/config.yaml", "--pod-infra-container-image="+pauseImage,
		"--cni-bin-dir=/usr/lib/cni", "-v=2")
	t.Cleanup(func() { c.DeleteNode(t, name) })

	node := waitAPINodeReady(t, c, name, 3*time.Minute)
	if log := exec("journalctl", "-u", "kubelet", "--no-pager"); !strings.Contains(log, "Using cgroup driver setting received from the CRI runtime") {
		t.Errorf("the kubelet did not take Docker's driver; its log:\n%s", cmdtest.LastLines(log, 30))
	}
	if got := node.Status.NodeInfo.ContainerRuntimeVersion; !strings.HasPrefix(got, "docker://26.") {
		t.Errorf("containerRuntimeVersion %q, want docker://26.x", got)
	}

	cgroup := func(rel, file string) string {
		t.Helper()
		return exec("cat", filepath.Join("/sys/fs/cgroup", rel, file))
	}
	capacity := node.Status.Capacity[v1.ResourceMemory]
	if got, want := cgroup(layout.kubepods, "memory.max"), strconv.FormatInt(capacity.Value()-100<<20, 10); got != want {
		t.Errorf("%s memory.max = %s, want capacity - kube-reserved = %s", layout.kubepods, got, want)
	}

	ns := "default"
	pod := func(podName string, policy v1.RestartPolicy, cmd string, req, lim v1.ResourceList) *v1.Pod {
		return &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, Namespace: ns},
			Spec: v1.PodSpec{RestartPolicy: policy, NodeName: name, Containers: []v1.Container{{
				Name: "main", Image: busyboxImage, ImagePullPolicy: v1.PullNever, Command: []string{"sh", "-c", cmd},
				Resources: v1.ResourceRequirements{Requests: req, Limits: lim},
			}}},
		}
	}
	rl := func(cpu, mem string) v1.ResourceList {
		l := v1.ResourceList{}
		if cpu != "" {
			l[v1.ResourceCPU] = resource.MustParse(cpu)
		}
		if mem != "" {
			l[v1.ResourceMemory] = resource.MustParse(mem)
		}
		return l
	}
	for _, p := range []*v1.Pod{
		pod("burst", v1.RestartPolicyAlways, "exec sleep 3600", rl("100m", "32Mi"), rl("500m", "64Mi")),
		pod("guar", v1.RestartPolicyAlways, "exec sleep 3600", rl("200m", "48Mi"), rl("200m", "48Mi")),
		// 48Mi: with Docker's cgroupfs driver on v2, runc's init is charged to
		// the container and was OOM-killed at 16Mi before the command ran.
		pod("oom", v1.RestartPolicyNever, oomHog(layout), nil, rl("", "48Mi")),
	} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			zero := int64(0)
			_ = c.Client.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		})
	}
	running := func(podName string) *v1.Pod {
		var got *v1.Pod
		waitUntil(t, 3*time.Minute, podName+" runs", func() bool {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{})
			got = p
			return err == nil && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
		})
		return got
	}
	burst, guar := running("burst"), running("guar")
	scope := func(p *v1.Pod) string {
		return layout.container(strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "docker://"))
	}
	burstSlice := layout.burstablePod(string(burst.UID))
	guarSlice := layout.guaranteed(string(guar.UID))
	for _, check := range []struct{ dir, file, want string }{
		{burstSlice, "cpu.weight", "4"}, // 102 shares: 1 + (102-2)*9999/262142
		{burstSlice, "cpu.max", "50000 100000"},
		{burstSlice, "memory.max", strconv.Itoa(64 << 20)},
		{burstSlice + "/" + scope(burst), "memory.max", strconv.Itoa(64 << 20)},
		{burstSlice + "/" + scope(burst), "cpu.max", "50000 100000"},
		// MemoryQoS: floor((32Mi + 0.9*(64Mi-32Mi)) / 4096) * 4096.
		{burstSlice + "/" + scope(burst), "memory.high", "63750144"},
		{burstSlice + "/" + scope(burst), "memory.min", "0"},
		{guarSlice, "cpu.weight", "8"}, // 204 shares
		{guarSlice, "cpu.max", "20000 100000"},
		{guarSlice, "memory.max", strconv.Itoa(48 << 20)},
		{guarSlice + "/" + scope(guar), "memory.high", "max"}, // request == limit: none
		{layout.besteffort, "cpu.weight", "1"},
	} {
		if got := cgroup(check.dir, check.file); got != check.want {
			t.Errorf("%s/%s = %s, want %s", check.dir, check.file, got, check.want)
		}
	}
	// singleProcessOOMKill unset: false on cgroup v2, the group kill. Under
	// Docker's systemd driver systemd puts memory.oom.group back to 0
	// whenever it applies a scope's properties again (not checked there).
	if layout.driver == "cgroupfs" {
		for _, dir := range []string{burstSlice + "/" + scope(burst), guarSlice + "/" + scope(guar)} {
			if got := cgroup(dir, "memory.oom.group"); got != "1" {
				t.Errorf("%s/memory.oom.group = %s, want 1", dir, got)
			}
		}
	}

	waitUntil(t, 3*time.Minute, "the hog is OOM-killed", func() bool {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "oom", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term != nil && term.Reason != "OOMKilled" {
			t.Fatalf("the hog ended %+v, want OOMKilled", term)
		}
		return term != nil
	})

	base := fmt.Sprintf("http://127.0.0.1:%d", v.HostPort(t, 10255))
	get := func(path string) (string, error) {
		cl := http.Client{Timeout: 10 * time.Second}
		resp, err := cl.Get(base + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("%s: %s", path, resp.Status)
		}
		return string(b), err
	}
	waitUntil(t, 90*time.Second, "/metrics/cadvisor has the burstable container's rows", func() bool {
		body, err := get("/metrics/cadvisor")
		if err != nil {
			return false
		}
		want := map[string]bool{"container_memory_working_set_bytes{": false, "container_cpu_usage_seconds_total{": false, "container_spec_memory_limit_bytes{": false}
		for _, l := range strings.Split(body, "\n") {
			for prefix := range want {
				if strings.HasPrefix(l, prefix) && strings.Contains(l, `container="main"`) && strings.Contains(l, `pod="burst"`) &&
					strings.Contains(l, "/"+burstSlice+"/"+scope(burst)) {
					want[prefix] = true
				}
			}
		}
		for _, ok := range want {
			if !ok {
				return false
			}
		}
		return true
	})
	waitUntil(t, 90*time.Second, "/stats/summary has the burstable pod's container with memory and CPU", func() bool {
		body, err := get("/stats/summary")
		if err != nil {
			return false
		}
		var sum struct {
			Pods []struct {
				PodRef     struct{ Name string }
				Containers []struct {
					Name   string
					CPU    *struct{ UsageCoreNanoSeconds *uint64 } `json:"cpu"`
					Memory *struct{ WorkingSetBytes *uint64 }      `json:"memory"`
				}
			}
		}
		if json.Unmarshal([]byte(body), &sum) != nil {
			return false
		}
		for _, p := range sum.Pods {
			for _, ct := range p.Containers {
				if p.PodRef.Name == "burst" && ct.Name == "main" && ct.CPU != nil && ct.CPU.UsageCoreNanoSeconds != nil &&
					ct.Memory != nil && ct.Memory.WorkingSetBytes != nil && *ct.Memory.WorkingSetBytes > 0 {
					return true
				}
			}
		}
		return false
	})

	// In-place resize through the resize subresource.
	patch := []byte(`{"spec":{"containers":[{"name":"main","resources":{"requests":{"cpu":"150m","memory":"32Mi"},"limits":{"cpu":"300m","memory":"80Mi"}}}]}}`)
	if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, "burst", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "resize"); err != nil {
		t.Fatalf("resize: %v", err)
	}
	waitUntil(t, 2*time.Minute, "the resize is actuated", func() bool {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "burst", metav1.GetOptions{})
		if err != nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].Resources == nil {
			return false
		}
		lim := p.Status.ContainerStatuses[0].Resources.Limits
		return lim.Cpu().MilliValue() == 300 && lim.Memory().Value() == 80<<20
	})
	for _, check := range []struct{ dir, file, want string }{
		{burstSlice, "cpu.max", "30000 100000"},
		{burstSlice, "memory.max", strconv.Itoa(80 << 20)},
		{burstSlice, "cpu.weight", "6"}, // 153 shares
		{burstSlice + "/" + scope(burst), "cpu.max", "30000 100000"},
		{burstSlice + "/" + scope(burst), "memory.max", strconv.Itoa(80 << 20)},
		// floor((32Mi + 0.9*(80Mi-32Mi)) / 4096) * 4096
		{burstSlice + "/" + scope(burst), "memory.high", "78852096"},
	} {
		if got := cgroup(check.dir, check.file); got != check.want {
			t.Errorf("after the resize, %s/%s = %s, want %s", check.dir, check.file, got, check.want)
		}
	}

	// The static CPU manager: one CPU for the Guaranteed pod that asks for a
	// whole one, the others (but reserved CPU 0's) shared.
	pinnedPod := pod("pinned", v1.RestartPolicyAlways, "exec sleep 3600", rl("1", "32Mi"), rl("1", "32Mi"))
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pinnedPod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.Client.CoreV1().Pods(ns).Delete(context.Background(), "pinned", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	pinned := running("pinned")
	pinnedScope := layout.guaranteed(string(pinned.UID)) + "/" + scope(pinned)
	exclusive := cgroup(pinnedScope, "cpuset.cpus")
	if exclusive == "0" || strings.ContainsAny(exclusive, ",-") {
		t.Errorf("the pinned container's cpuset.cpus = %q, want one CPU other than the reserved 0", exclusive)
	}
	// The shared pool as the kernel prints it: CPUs 0-2 less the exclusive one.
	shared := map[string]string{"1": "0,2", "2": "0-1"}[exclusive]
	waitUntil(t, time.Minute, "the burstable container leaves the exclusive CPU", func() bool {
		return cgroup(burstSlice+"/"+scope(burst), "cpuset.cpus") == shared
	})

	// Eviction last: MemoryPressure stays for the transition period.
	hog := pod("hog", v1.RestartPolicyNever, "head -c 700m /dev/zero | tail; sleep 3600", nil, nil)
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.Client.CoreV1().Pods(ns).Delete(context.Background(), "hog", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	var evicted *v1.Pod
	waitUntil(t, 4*time.Minute, "the memory hog is evicted", func() bool {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "hog", metav1.GetOptions{})
		evicted = p
		return err == nil && p.Status.Phase == v1.PodFailed
	})
	checkMemoryEviction(t, c, name, evicted, fmt.Sprintf("%dMi", thresholdMi))
	for _, podName := range []string{"burst", "guar"} {
		if p, err := c.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{}); err != nil || p.Status.Phase != v1.PodRunning {
			t.Errorf("%s after the eviction: phase %v, %v; want Running", podName, p.Status.Phase, err)
		}
	}
	out, _ := yaml.Marshal(evicted.Status)
	t.Logf("evicted: %s; whole test %s", strings.ReplaceAll(string(out), "\n", " "), time.Since(begin).Round(time.Second))
}
