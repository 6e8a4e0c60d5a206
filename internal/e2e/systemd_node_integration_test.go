//go:build linux

package e2e

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

	"github.com/kubelet-dockershim/kubelet/internal/testutil/cmdtest"
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
//   - /metrics/cadvisor has the container's rows.
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
	n := nodecontainer.Start(t, nodecontainer.Options{Name: "sdnode", Binaries: bins, Images: []string{pauseImage, busyboxImage}})
	if out, err := n.Exec(t, "systemd-run", "--unit=kubelet", "--", "/usr/local/bin/kubelet",
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
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v", err)
		}
		return strings.TrimSpace(string(b))
	}
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
