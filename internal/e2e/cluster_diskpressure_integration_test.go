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

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
)

// unusedImage is loaded into the disk test's dockerd and used by nothing.
const unusedImage = "kubelet-dockershim/busybox-dynamic:latest"

// testDiskPressure (issue 13): a private dockerd whose data root, the
// kubelet's root dir and the pod logs share one small ext4 (so the image
// filesystem is not dedicated, and disk pressure reclaims dead containers
// and unused images before it evicts). A pod filling the disk past
// --eviction-hard gives DiskPressure; first the dead container of a finished
// pod is removed, which is enough; when the pod fills the disk again the
// unused image goes, then the pod is evicted, while a static pod (critical)
// keeps running; new pods are refused while the condition holds.
func testDiskPressure(t *testing.T, c *controlplane.Cluster) {
	const mi = 1 << 20
	d := dockerd.Start(t, dockerd.Options{Images: []string{pauseImage, busyboxImage, unusedImage}, DiskMiB: 640})
	n := newClusterNode(t, c)
	n.runtime = []string{"--container-runtime=docker", "--docker-endpoint=" + d.Endpoint}
	n.rt = daemonView{d}
	n.rootDir, n.logsDir = filepath.Join(d.Disk, "kubelet"), filepath.Join(d.Disk, "logs")
	for _, dir := range []string{n.rootDir, n.logsDir} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.writeConfig()
	n.createNamespace()
	n.extra = append(n.extra, "--eviction-hard=nodefs.available<35%,imagefs.available<35%",
		"--eviction-pressure-transition-period=30s", "--minimum-image-ttl-duration=0s")
	n.start()
	n.waitNodeReady(90 * time.Second)
	n.checkNodeImages(pauseImage, busyboxImage, unusedImage)
	n.writeManifest("keeper.yaml", manifest("keeper", "  containers:\n  - name: app\n    image: @IMAGE@\n    imagePullPolicy: Never\n    command: [sleep, \"3600\"]\n"))
	n.waitPod("keeper", podStartTimeout, "running", runningAndReady)

	// A finished pod whose dead container holds 120Mi.
	n.applyYAML(strings.Replace(n.boundPodYAML("done", 1, `["dd", "if=/dev/zero", "of=/big", "bs=1M", "count=120"]`),
		"spec:\n", "spec:\n  restartPolicy: Never\n", 1))
	done := n.waitAPIPod("done", podStartTimeout, "succeeded", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodSucceeded })

	// 1. The filler goes 30Mi past the threshold: removing the dead container
	// is enough, no pod is evicted.
	capacity, avail := fsSpace(t, d.Disk)
	threshold := capacity * 35 / 100
	n.applyYAML(n.boundPodYAML("filler", 1, fmt.Sprintf(`["sh", "-c", "dd if=/dev/zero of=/big1 bs=1M count=%d; while [ ! -e /go ]; do sleep 1; done; dd if=/dev/zero of=/big2 bs=1M count=$(cat /go); sleep 3600"]`,
		(avail-threshold)/mi+30), "resources: {requests: {memory: 8Mi}}"))
	filler := n.waitAPIPod("filler", podStartTimeout, "running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	n.waitContainers(90*time.Second, "the finished pod's dead container removed", true, func(ids []string) bool { return len(ids) == 0 },
		"io.kubernetes.pod.uid="+string(done.UID), "io.kubernetes.container.name=main")
	n.waitNodeCondition(v1.NodeDiskPressure, v1.ConditionTrue, 20*time.Second)
	n.waitNodeEvent("EvictionThresholdMet", "Attempting to reclaim ephemeral-storage")
	n.waitLogLine("able to reduce resource pressure without evicting pods", 10*time.Second)
	if p, err := n.apiPod("filler"); err != nil || p.Status.Phase != v1.PodRunning {
		t.Fatalf("the filler was evicted although removing the dead container was enough: %v %+v", err, p.Status)
	}

	// 2. The filler goes past the threshold again: the unused image goes,
	// then the filler is evicted; the static pod is critical and stays.
	_, avail = fsSpace(t, d.Disk)
	id := strings.TrimPrefix(filler.Status.ContainerStatuses[0].ContainerID, "docker://")
	if out, err := d.CLI(context.Background(), "exec", id, "sh", "-c", fmt.Sprintf("echo %d > /go.tmp && mv /go.tmp /go", (avail-threshold)/mi+60)); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	filler = n.waitAPIPod("filler", 2*time.Minute, "evicted", isFailedEvicted)
	if !strings.HasPrefix(filler.Status.Message, evictedMessagePrefix("ephemeral-storage")) {
		t.Errorf("evicted filler message %q, want %q...", filler.Status.Message, evictedMessagePrefix("ephemeral-storage"))
	}
	checkDisruptionTarget(t, filler, true)
	n.checkEvictedEvent(filler, "ephemeral-storage")
	if out, err := d.CLI(context.Background(), "image", "inspect", unusedImage); err == nil {
		t.Errorf("the unused image %s is still there after disk pressure: %s", unusedImage, out)
	}
	for _, img := range []string{pauseImage, busyboxImage} {
		if out, err := d.CLI(context.Background(), "image", "inspect", img); err != nil {
			t.Errorf("image %s (pinned or in use) was removed: %v: %s", img, err, out)
		}
	}
	n.waitPod("keeper", 5*time.Second, "the static pod still running", runningAndReady)
	// Counted once the kill returned (the status may be there first).
	n.poll(20*time.Second, "kubelet_evictions of the disk signals = 1", func() (bool, string) {
		var evictions float64
		for _, signal := range []string{"imagefs.available", "nodefs.available"} {
			v, _ := n.metric(`kubelet_evictions{eviction_signal="` + signal + `"}`)
			evictions += v
		}
		return evictions == 1, fmt.Sprint(evictions)
	})

	// While DiskPressure holds, the controller-manager taints the node and
	// new pods are refused.
	n.waitTaint(v1.TaintNodeDiskPressure, true, 20*time.Second)
	n.applyYAML(n.boundPodYAML("late", 1, `["sleep", "3600"]`, "resources: {requests: {memory: 8Mi}}"))
	late := n.waitAPIPod("late", 30*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if want := "Pod was rejected: The node had condition: [DiskPressure]. "; late.Status.Reason != "Evicted" || late.Status.Message != want {
		t.Errorf("pod under disk pressure: reason %q message %q, want Evicted / %q", late.Status.Reason, late.Status.Message, want)
	}
}

// checkNodeImages waits until node.status.images lists exactly the images
// (by name, largest first, each with its size).
func (n *clusterNode) checkNodeImages(images ...string) {
	n.t.Helper()
	n.poll(90*time.Second, "node.status.images lists the runtime's images", func() (bool, string) {
		node, err := n.apiNode()
		if err != nil {
			return false, err.Error()
		}
		got := node.Status.Images
		if len(got) != len(images) {
			return false, fmt.Sprintf("%+v", got)
		}
		for i := range got {
			if got[i].SizeBytes <= 0 || len(got[i].Names) == 0 || len(got[i].Names) > 5 ||
				(i > 0 && got[i].SizeBytes > got[i-1].SizeBytes) {
				return false, fmt.Sprintf("%+v", got)
			}
		}
		for _, want := range images {
			found := false
			for _, img := range got {
				for _, name := range img.Names {
					found = found || name == want || strings.HasSuffix(name, "/"+want)
				}
			}
			if !found {
				return false, fmt.Sprintf("no %s in %+v", want, got)
			}
		}
		return true, ""
	})
}

// fsSpace is the capacity and available bytes of the filesystem holding dir.
func fsSpace(t *testing.T, dir string) (capacity, available int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize
}

// waitNodeEvent waits for an event of the node with reason and message.
func (n *clusterNode) waitNodeEvent(reason, message string) {
	n.t.Helper()
	n.poll(30*time.Second, "node event "+reason, func() (bool, string) {
		evs, err := n.c.Client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + n.name + ",reason=" + reason})
		if err != nil {
			return false, err.Error()
		}
		var msgs []string
		for _, e := range evs.Items {
			if e.Message == message {
				return true, ""
			}
			msgs = append(msgs, e.Message)
		}
		return false, strings.Join(msgs, " | ")
	})
}
