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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// testNodeAllocatable (issue 12 item 3): a node started with reservations
// publishes allocatable = capacity - kube-reserved - system-reserved - the
// hard eviction threshold, sizes its kubepods cgroup to capacity -
// kube-reserved - system-reserved (no eviction threshold: eviction acts before
// the cgroup OOM-kills), records the enforcement event on the Node, and
// rejects a pod bound to it whose cpu request exceeds allocatable with
// OutOfcpu.
func testNodeAllocatable(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.extra = append(n.extra, "--kube-reserved=cpu=500m,memory=512Mi", "--system-reserved=memory=256Mi",
		"--eviction-hard=memory.available<128Mi", "--enforce-node-allocatable=pods")
	n.start()
	node := n.waitNodeReady(90 * time.Second)

	capCPU, capMem := node.Status.Capacity.Cpu().MilliValue(), node.Status.Capacity.Memory().Value()
	wantCPU, wantMem := capCPU-500, capMem-(512+256+128)<<20
	if got := node.Status.Allocatable.Cpu().MilliValue(); got != wantCPU {
		t.Errorf("allocatable cpu %dm, want capacity %dm - 500m = %dm", got, capCPU, wantCPU)
	}
	if got := node.Status.Allocatable.Memory().Value(); got != wantMem {
		t.Errorf("allocatable memory %d, want capacity %d - 896Mi = %d", got, capMem, wantMem)
	}

	kubepods := n.cgroupRoot + "/kubepods"
	memLimit := cgroupValue(t, "memory", kubepods, "memory.limit_in_bytes")
	if want := strconv.FormatInt(capMem-(512+256)<<20, 10); memLimit != want {
		t.Errorf("kubepods memory.limit_in_bytes = %s, want capacity - 768Mi = %s", memLimit, want)
	}
	shares := cgroupValue(t, "cpu", kubepods, "cpu.shares")
	if want := strconv.FormatInt((capCPU-500)*1024/1000, 10); shares != want {
		t.Errorf("kubepods cpu.shares = %s, want (capacity - 500m) in shares = %s", shares, want)
	}

	n.poll(30*time.Second, "the SuccessfulNodeAllocatableEnforcement event of the node", func() (bool, string) {
		evs, err := c.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + n.name + ",reason=SuccessfulNodeAllocatableEnforcement"})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Message == "Updated Node Allocatable limit across pods" && e.Type == v1.EventTypeNormal {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})

	// Bound to the node directly (no scheduler): the kubelet's admission
	// is what refuses it.
	request := wantCPU + 300
	n.applyYAML(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: @NS@}
spec:
  nodeName: %s
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resources: {requests: {cpu: %dm}}
`, n.name, request))
	p := n.waitAPIPod("too-big", 60*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	wantMsg := fmt.Sprintf("Node didn't have enough resource: cpu, requested: %d, used: 0, capacity: %d", request, wantCPU)
	if p.Status.Reason != "OutOfcpu" || !strings.Contains(p.Status.Message, wantMsg) {
		t.Errorf("rejected pod: reason %q message %q, want OutOfcpu and %q", p.Status.Reason, p.Status.Message, wantMsg)
	}
	if ids := n.containers(true, "io.kubernetes.pod.uid="+string(p.UID)); len(ids) != 0 {
		t.Errorf("the rejected pod has containers: %v", ids)
	}
}
