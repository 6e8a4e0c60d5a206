//go:build linux

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestIntegrationSysctlAdmission: a pod setting a sysctl that is neither safe
// nor in allowedUnsafeSysctls is rejected with upstream's reason and message
// before anything runs; a safe one and an allowed unsafe one run, the value
// set in the pod's namespace. With the DefaultPodSysctls gate, the node's
// defaultPodSysctls (a --config-dir drop-in) are set in every pod's
// namespaces, the pod's own winning.
func TestIntegrationSysctlAdmission(t *testing.T) {
	n := newNode(t)
	dropIns := filepath.Join(n.dir, "config.d")
	if err := os.MkdirAll(dropIns, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dropIns, "10-sysctls.conf"), []byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"+
		"defaultPodSysctls: {kernel.shm_rmid_forced: \"1\", net.ipv4.ip_local_port_range: \"40000 50000\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n.extra = append(n.extra, "--allowed-unsafe-sysctls=kernel.msg*", "--feature-gates=DefaultPodSysctls=true", "--config-dir="+dropIns)
	n.start()
	pod := func(name, sysctl, value string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: @NS@
spec:
  terminationGracePeriodSeconds: 1
  securityContext:
    sysctls:
    - {name: %s, value: %q}
  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
`, name, sysctl, value)
	}
	n.writeManifest("forbidden.yaml", pod("forbidden", "kernel.sem", "250 32000 100 128"))
	n.writeManifest("safe.yaml", pod("safe", "net.ipv4.ip_local_port_range", "20000 30000"))
	n.writeManifest("allowed.yaml", pod("allowed", "kernel.msgmax", "65536"))
	p := n.waitPod("forbidden", time.Minute, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "SysctlForbidden" || p.Status.Message != `Pod was rejected: forbidden sysctl: "kernel.sem" not allowlisted` {
		t.Errorf("rejected pod: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	if ids := n.containers(true, "io.kubernetes.pod.uid="+string(p.UID)); len(ids) != 0 {
		t.Errorf("the rejected pod has containers: %v", ids)
	}
	for _, name := range []string{"safe", "allowed"} {
		n.waitPod(name, podStartTimeout, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	}
	// The defaults: both in a pod of its own; the pod's port range over the
	// node's default in "safe".
	n.writeManifest("defaults.yaml", `apiVersion: v1
kind: Pod
metadata: {name: defaults, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - {name: app, image: @IMAGE@, imagePullPolicy: IfNotPresent,
     command: [sh, -c, "cat /proc/sys/kernel/shm_rmid_forced /proc/sys/net/ipv4/ip_local_port_range"]}
`)
	p = n.waitPod("defaults", podStartTimeout, "done", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })
	waitLog(t, n, p, "app", "50000", 30*time.Second) // the log copier may still be writing
	if out, err := n.podLog(p, "app", 0); err != nil || strings.Join(strings.Fields(out), " ") != "1 40000 50000" {
		t.Errorf("sysctls in a pod of the node with defaults: %q %v, want 1 and 40000 50000", out, err)
	}
	safe := n.waitPod("safe", podStartTimeout, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	ids := n.containers(false, "io.kubernetes.pod.uid="+string(safe.UID), "io.kubernetes.container.name=app")
	if len(ids) != 1 {
		t.Fatalf("the safe pod's container: %v", ids)
	}
	out, err := n.s.dockerCLI(context.Background(), "exec", ids[0], "cat", "/proc/sys/net/ipv4/ip_local_port_range", "/proc/sys/kernel/shm_rmid_forced")
	if got := strings.Join(strings.Fields(string(out)), " "); err != nil || got != "20000 30000 1" {
		t.Errorf("the safe pod's sysctls: %q %v, want its own port range 20000 30000 and the default shm_rmid_forced 1", out, err)
	}
}
