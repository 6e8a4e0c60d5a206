//go:build linux

package status

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// nodeName returns a node name unique to the test.
func nodeName(t *testing.T) string {
	n := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	n = strings.TrimPrefix(n, "testintegration")
	return fmt.Sprintf("st-%s-%d", n, time.Now().UnixNano()%100000)
}

// registerNode creates a schedulable, Ready Node through the node's own
// client (as the kubelet does) and removes it at the end of the test.
func registerNode(t *testing.T, c *controlplane.Cluster, nc kubernetes.Interface, name string) *v1.Node {
	t.Helper()
	res := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("4"),
		v1.ResourceMemory: resource.MustParse("8Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Status: v1.NodeStatus{
			Capacity: res, Allocatable: res,
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "127.0.0.1"}},
		},
	}
	return c.CreateNode(context.Background(), t, nc, node)
}

// createPod creates pod with the admin client and force-deletes it at the end
// of the test.
func createPod(t *testing.T, c *controlplane.Cluster, pod *v1.Pod) *v1.Pod {
	t.Helper()
	created, err := c.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod: %v", err)
	}
	t.Cleanup(func() { forceDelete(c, pod.Namespace, pod.Name) })
	return created
}

func forceDelete(c *controlplane.Cluster, namespace, name string) {
	grace := int64(0)
	_ = c.Client.CoreV1().Pods(namespace).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
}

// testPodOn is a minimal pod bound to node.
func testPodOn(name, node string, policy v1.RestartPolicy, containers ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1.PodSpec{NodeName: node, RestartPolicy: policy},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "example.invalid/busybox:1"})
	}
	return p
}

// waitPod polls the API pod until ok accepts it (or the timeout).
func waitPod(t *testing.T, client kubernetes.Interface, namespace, name string, timeout time.Duration, ok func(*v1.Pod) bool) *v1.Pod {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *v1.Pod
	var lastErr error
	for time.Now().Before(deadline) {
		last, lastErr = client.CoreV1().Pods(namespace).Get(context.Background(), name, metav1.GetOptions{})
		if lastErr == nil && ok(last) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lastErr != nil {
		t.Fatalf("pod %s/%s: %v", namespace, name, lastErr)
	}
	t.Fatalf("pod %s/%s did not reach the expected state; status: %+v", namespace, name, last.Status)
	return nil
}

// runManager starts m.Run until the end of the test.
func runManager(t *testing.T, m syncedManager) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// kubeletStatus is a status as the kubelet generates it for a running pod
// whose containers are given as name=restartCount pairs.
func kubeletStatus(ready bool, podIP string, containers map[string]int32) v1.PodStatus {
	readyStatus := v1.ConditionFalse
	if ready {
		readyStatus = v1.ConditionTrue
	}
	now := metav1.Now()
	s := v1.PodStatus{
		Phase: v1.PodRunning,
		Conditions: []v1.PodCondition{
			{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue},
			{Type: v1.PodInitialized, Status: v1.ConditionTrue},
			{Type: v1.PodReady, Status: readyStatus},
			{Type: v1.ContainersReady, Status: readyStatus},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		},
		HostIP:  "10.0.0.10",
		HostIPs: []v1.HostIP{{IP: "10.0.0.10"}},
		PodIP:   podIP,
		PodIPs:  []v1.PodIP{{IP: podIP}},
	}
	for _, name := range slices.Sorted(maps.Keys(containers)) {
		started := true
		s.ContainerStatuses = append(s.ContainerStatuses, v1.ContainerStatus{
			Name: name, Ready: ready, Started: &started, RestartCount: containers[name],
			Image: "example.invalid/busybox:1", ImageID: "docker-pullable://example.invalid/busybox@sha256:" + strings.Repeat("a", 64),
			ContainerID: fmt.Sprintf("docker://%s-%d", name, containers[name]),
			State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return s
}
