//go:build linux

package e2e

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestIntegrationSysctlAdmission: a pod setting a sysctl that is neither safe
// nor in allowedUnsafeSysctls is rejected with upstream's reason and message
// before anything runs; a safe one and an allowed unsafe one run, the value
// set in the pod's namespace.
func TestIntegrationSysctlAdmission(t *testing.T) {
	n := newNode(t)
	n.extra = append(n.extra, "--allowed-unsafe-sysctls=kernel.msg*")
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
}
