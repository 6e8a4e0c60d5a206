//go:build linux

package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

const envManifest = `apiVersion: v1
kind: Pod
metadata:
  name: env
  namespace: @NS@
  labels:
    tier: e2e
  annotations:
    note: hello
spec:
  terminationGracePeriodSeconds: 1
  hostAliases:
  - ip: "10.9.8.7"
    hostnames: ["foo.local", "bar.local"]
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c"]
    args:
    - |
      for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do [ -f /shared/from-writer ] && break; sleep 1; done
      echo "POD_NAME=$(POD_NAME)"
      echo "POD_NS=$(POD_NS)"
      echo "NODE=$(NODE_NAME)"
      echo "POD_IP=$(POD_IP)"
      echo "MEM_LIMIT=$(MEM_LIMIT)"
      echo "CPU_REQ=$(CPU_REQ)"
      echo "GREETING=$(GREETING)"
      echo 'ESCAPED=$$(POD_NAME)'
      echo 'MISSING=$(NOPE)'
      echo "SHELL_ENV=$GREETING"
      printf 'SHARED='; cat /shared/from-writer
      printf 'LABELS='; cat /etc/podinfo/labels; echo
      printf 'NOTE='; grep '^note=' /etc/podinfo/annotations
      printf 'MEMFILE='; cat /etc/podinfo/mem_limit; echo
      echo HOSTS-BEGIN; cat /etc/hosts; echo HOSTS-END
      echo DONE
      exec sleep 3600
    env:
    - name: POD_NAME
      valueFrom: {fieldRef: {fieldPath: metadata.name}}
    - name: POD_NS
      valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
    - name: NODE_NAME
      valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
    - name: MEM_LIMIT
      valueFrom: {resourceFieldRef: {containerName: main, resource: limits.memory, divisor: 1Mi}}
    - name: CPU_REQ
      valueFrom: {resourceFieldRef: {resource: requests.cpu, divisor: 1m}}
    - name: GREETING
      value: "hi-$(POD_NAME)"
    resources:
      requests: {memory: 32Mi, cpu: 50m}
      limits: {memory: 64Mi, cpu: 500m}
    volumeMounts:
    - {name: shared, mountPath: /shared}
    - {name: podinfo, mountPath: /etc/podinfo, readOnly: true}
  - name: writer
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "echo written-by-writer > /shared/from-writer; exec sleep 3600"]
    volumeMounts:
    - {name: shared, mountPath: /shared}
  volumes:
  - name: shared
    emptyDir: {}
  - name: podinfo
    downwardAPI:
      items:
      - path: labels
        fieldRef: {fieldPath: metadata.labels}
      - path: annotations
        fieldRef: {fieldPath: metadata.annotations}
      - path: mem_limit
        resourceFieldRef: {containerName: main, resource: limits.memory, divisor: 1Mi}
`

// TestIntegrationDockerModeEnvAndVolumes is (i): env from fieldRef and
// resourceFieldRef, $(VAR) expansion in env and args ($$ escapes, unknown
// references kept), an emptyDir shared by two containers, a downwardAPI volume
// and hostAliases in the managed /etc/hosts, all read back from the container's
// CRI log file under podLogsDir.
func TestIntegrationDockerModeEnvAndVolumes(t *testing.T) {
	n := newNode(t)
	n.start()
	n.writeManifest("env.yaml", envManifest)
	p := n.waitPod("env", podStartTimeout, "running", runningAndReady)
	out := waitLog(t, n, p, "main", "DONE", 30*time.Second)
	lines := strings.Split(out, "\n")

	name := n.podName("env")
	for _, want := range []string{
		"POD_NAME=" + name,
		"POD_NS=" + n.ns,
		"NODE=" + n.name,
		"POD_IP=" + p.Status.PodIP,
		"MEM_LIMIT=64",
		"CPU_REQ=50",
		"GREETING=hi-" + name,
		"ESCAPED=$(POD_NAME)",
		"MISSING=$(NOPE)",
		"SHELL_ENV=hi-" + name,
		"SHARED=written-by-writer",
		`LABELS=tier="e2e"`,
		`NOTE=note="hello"`,
		"MEMFILE=64",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("the container's output lacks the line %q", want)
		}
	}
	hosts := between(lines, "HOSTS-BEGIN", "HOSTS-END")
	if !hasFields(hosts, "10.9.8.7", "foo.local", "bar.local") {
		t.Errorf("/etc/hosts lacks the hostAliases line:\n%s", strings.Join(hosts, "\n"))
	}
	if !hasFields(hosts, p.Status.PodIP, name) {
		t.Errorf("/etc/hosts lacks the line of the pod IP %s and hostname %s:\n%s", p.Status.PodIP, name, strings.Join(hosts, "\n"))
	}
	if t.Failed() {
		t.Logf("the container's output:\n%s", out)
	}
}

// waitLog polls a container's CRI log until it contains marker and returns it.
func waitLog(t *testing.T, n *node, p *v1.Pod, container, marker string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err := n.podLog(p, container, 0)
		if err == nil && strings.Contains(out, marker) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("log of %s/%s has no %q after %s (err %v):\n%s", p.Name, container, marker, timeout, err, out)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// between returns the lines strictly between the first begin and the next end.
func between(lines []string, begin, end string) []string {
	i := slices.Index(lines, begin)
	if i < 0 {
		return nil
	}
	rest := lines[i+1:]
	if j := slices.Index(rest, end); j >= 0 {
		return rest[:j]
	}
	return rest
}

// hasFields reports whether a line's whitespace-separated fields are exactly want.
func hasFields(lines []string, want ...string) bool {
	for _, l := range lines {
		if slices.Equal(strings.Fields(l), want) {
			return true
		}
	}
	return false
}
