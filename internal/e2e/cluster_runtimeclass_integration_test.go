//go:build linux

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
)

// testRuntimeClass (issue 30 item 1): a node on a private dockerd that has a
// second OCI runtime, crun (Debian's), registered as "crun".
//   - The Node's status.runtimeHandlers lists the default handler and every
//     runtime Docker knows; status.features is the runtime's.
//   - A pod of RuntimeClass "fast-<ns>" (handler crun, overhead 16Mi of
//     memory) runs its sandbox and its container with crun; its pod cgroup's
//     memory limit includes the overhead.
//   - A pod whose RuntimeClass was deleted after it was made, and one whose
//     class's handler Docker does not know, never start:
//     FailedCreatePodSandBox with upstream's NotFound message, and the
//     shim's unknown-handler error.
func testRuntimeClass(t *testing.T, c *controlplane.Cluster) {
	d := dockerd.Start(t, dockerd.Options{Images: []string{pauseImage, busyboxImage}, Runtimes: map[string]string{"crun": "/usr/bin/crun"}})
	n := newClusterNode(t, c)
	n.runtime = []string{"--container-runtime=docker", "--docker-endpoint=" + d.Endpoint}
	n.rt = daemonView{d}
	n.writeConfig()
	n.createNamespace()
	fast, missing, broken := "fast-"+n.ns, "missing-"+n.ns, "broken-"+n.ns
	withClass := func(name, class string) string {
		return strings.Replace(n.boundPodYAML(name, 1, `[sleep, "3600"]`, "resources: {limits: {memory: 32Mi}}"),
			"spec:\n", "spec:\n  runtimeClassName: "+class+"\n", 1)
	}
	// The API server refuses a pod of a class that does not exist: the
	// class of pod "missing" is deleted after the pod was made, before the
	// kubelet starts.
	n.deleteAtEnd("runtimeclass/"+fast, "runtimeclass/"+broken, "runtimeclass/"+missing)
	n.applyYAML(fmt.Sprintf("apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: %s}\nhandler: crun\n", missing))
	n.applyYAML(withClass("missing", missing))
	n.kubectl("", "delete", "runtimeclass", missing)
	n.start()
	node := n.waitNodeReady(90 * time.Second)

	handlers := map[string]bool{}
	for _, h := range node.Status.RuntimeHandlers {
		handlers[h.Name] = h.Features != nil && h.Features.RecursiveReadOnlyMounts != nil && h.Features.UserNamespaces != nil
	}
	if !handlers[""] || !handlers["crun"] || !handlers["runc"] {
		t.Errorf("status.runtimeHandlers = %+v, want the default, runc and crun, each with its features", node.Status.RuntimeHandlers)
	}
	if f := node.Status.Features; f == nil || f.SupplementalGroupsPolicy == nil || *f.SupplementalGroupsPolicy {
		t.Errorf("status.features = %+v, want supplementalGroupsPolicy false (Docker cannot)", f)
	}

	n.applyYAML(fmt.Sprintf(`apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: %s}
handler: crun
overhead: {podFixed: {memory: 16Mi}}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: %s}
handler: nosuch
`, fast, broken))
	n.applyYAML(withClass("fast", fast) + "---\n" + withClass("broken", broken))

	p := n.waitAPIPod("fast", podStartTimeout, "running", runningAndReady)
	if p.Spec.Overhead.Memory().String() != "16Mi" {
		t.Errorf("pod overhead = %v, want the RuntimeClass's 16Mi", p.Spec.Overhead)
	}
	ids := d.Containers(t, true, "io.kubernetes.pod.uid="+string(p.UID))
	if len(ids) != 2 {
		t.Fatalf("containers of pod fast: %v, want the sandbox and main", ids)
	}
	for _, id := range ids {
		out, err := d.CLI(context.Background(), "inspect", "-f", "{{.HostConfig.Runtime}} {{.State.Running}}", id)
		if err != nil || strings.TrimSpace(out) != "crun true" {
			t.Errorf("container %s: runtime and running = %q (%v), want crun true", id, out, err)
		}
	}
	podCgroup := n.cgroupRoot + "/kubepods/burstable/pod" + string(p.UID)
	if got := cgroupValue(t, "memory", podCgroup, "memory.limit_in_bytes"); got != strconv.Itoa(48<<20) {
		t.Errorf("pod cgroup memory.limit_in_bytes = %s, want the container's 32Mi plus the 16Mi overhead", got)
	}

	for name, want := range map[string]string{
		"missing": fmt.Sprintf(`Failed to create pod sandbox: runtimeclass.node.k8s.io %q not found`, missing),
		"broken":  `Failed to create pod sandbox: rpc error: code = InvalidArgument desc = invalid argument: runtime_handler: unknown runtime handler "nosuch"`,
	} {
		p := n.waitAPIPod(name, 30*time.Second, "created", func(*v1.Pod) bool { return true })
		n.waitEvent(p, "FailedCreatePodSandBox", want)
		if p, err := n.apiPod(name); err != nil || p.Status.Phase != v1.PodPending {
			t.Errorf("pod %s: phase %v (%v), want Pending", name, p.Status.Phase, err)
		}
	}
}
