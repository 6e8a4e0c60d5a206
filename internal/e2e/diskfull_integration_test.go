//go:build linux

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// loopFS mounts a fresh ext4 filesystem of sizeMiB (no blocks reserved for
// root) on dir, from an image file in the node's temp dir; the node's
// cleanup unmounts it (mount -o loop detaches the loop device on unmount).
func (n *node) loopFS(dir string, sizeMiB int64) {
	n.t.Helper()
	img := filepath.Join(n.dir, filepath.Base(dir)+".img")
	f, err := os.Create(img)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := f.Truncate(sizeMiB << 20); err != nil {
		n.t.Fatal(err)
	}
	_ = f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := run(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", img); err != nil {
		n.t.Fatalf("mkfs.ext4 (scripts/prepare-host.sh installs e2fsprogs): %v: %s", err, out)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		n.t.Fatal(err)
	}
	if out, err := run(ctx, "mount", "-o", "loop", img, dir); err != nil {
		n.t.Fatalf("mount -o loop %s: %v: %s", img, err, out)
	}
}

// fill writes a filler file in dir until the filesystem is full, and
// returns a function that removes it.
func fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for range 1 << 14 { // bounded: 1 GiB at most
		if _, err = f.Write(buf); err != nil {
			break
		}
	}
	_ = f.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling %s: %v, want ENOSPC", dir, err)
	}
	// Small writes still find the odd free block: take those too.
	for i := 0; ; i++ {
		if os.WriteFile(filepath.Join(dir, "filler-small-"+string(rune('a'+i%26))+time.Now().Format("150405.000000000")), buf[:1024], 0o644) != nil {
			break
		}
	}
	return func() {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "filler") {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
}

// waitLogLine waits until the kubelet's log holds s.
func (n *node) waitLogLine(s string, timeout time.Duration) {
	n.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, _ := os.ReadFile(n.kubelet.logPath)
		if strings.Contains(string(b), s) {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("kubelet log has no %q within %s", s, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// The shim's checkpoint directory and the pod log directory on small
// filesystems that fill up: a pod that needs them fails with a clear error
// (no space left on device) and retries, the node stays healthy, pods
// already running keep running, nothing is left half-made, and once space
// is free the pod runs.
func TestIntegrationDockerModeDiskFull(t *testing.T) {
	n := newNode(t)
	n.loopFS(n.shimRoot, 8)
	n.loopFS(n.logsDir, 8)
	n.start()
	sleeper := func(name string) string {
		return manifest(name, `  containers:
  - name: app
    image: @IMAGE@
    imagePullPolicy: Never
    command: ["sh", "-c", "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.2; done"]
`)
	}
	n.writeManifest("before.yaml", sleeper("before"))
	before := n.waitPod("before", podStartTimeout, "running", runningAndReady)

	// Checkpoints: no room for a new sandbox's checkpoint.
	free := fill(t, filepath.Join(n.shimRoot, "sandbox"))
	n.writeManifest("cpfull.yaml", sleeper("cpfull"))
	n.waitLogLine("no space left on device", 90*time.Second)
	p := n.waitPod("cpfull", 10*time.Second, "pending while the checkpoint directory is full", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodPending })
	if body, code, err := n.get("/healthz"); err != nil || code != 200 || body != "ok" {
		t.Errorf("/healthz with a full checkpoint directory: %d %q %v", code, body, err)
	}
	if ids := n.containers(false, "io.kubernetes.pod.uid="+string(p.UID)); len(ids) != 0 {
		t.Errorf("running containers of the pod whose checkpoint cannot be written: %v", ids)
	}
	free()
	p = n.waitPod("cpfull", 2*time.Minute, "running once the checkpoint directory has room", runningAndReady)
	n.waitContainers(60*time.Second, "one sandbox of the pod", true, func(ids []string) bool { return len(ids) == 1 },
		"io.kubernetes.pod.uid="+string(p.UID), "io.kubernetes.docker.type=podsandbox")

	// Pod logs: a full log filesystem. The running pod keeps running (its
	// lines are lost while there is no room), a new pod fails with a clear
	// error until there is room again.
	free = fill(t, n.logsDir)
	n.writeManifest("logfull.yaml", sleeper("logfull"))
	n.waitLogLine("no space left on device", 90*time.Second)
	time.Sleep(5 * time.Second)
	if body, code, err := n.get("/healthz"); err != nil || code != 200 || body != "ok" {
		t.Errorf("/healthz with a full log directory: %d %q %v", code, body, err)
	}
	if got := n.waitPod("before", 10*time.Second, "still running", runningAndReady); restartCounts(got)["app"] != restartCounts(before)["app"] {
		t.Errorf("the running pod restarted while the log filesystem was full: %v -> %v", restartCounts(before), restartCounts(got))
	}
	free()
	p = n.waitPod("logfull", 2*time.Minute, "running once the log directory has room", runningAndReady)
	waitLog(t, n, p, "app", "line 3", 30*time.Second)
	// The first pod's log copying resumed once there was room.
	logBefore, _ := n.podLog(before, "app", 0)
	time.Sleep(2 * time.Second)
	logAfter, _ := n.podLog(before, "app", 0)
	if len(logAfter) <= len(logBefore) {
		t.Errorf("the running pod's log did not grow after space was freed (%d -> %d bytes)", len(logBefore), len(logAfter))
	}
	// Docker kept what the full disk could not take: no line is lost.
	for i, line := range strings.Split(strings.TrimSpace(logAfter), "\n") {
		if line != fmt.Sprintf("line %d", i) {
			t.Errorf("the running pod's log line %d is %q: lines lost or repeated while the disk was full", i, line)
			break
		}
	}
	if ips := n.reservedIPs(); len(ips) != 3 {
		t.Errorf("IPs held: %v, want one per running pod (3)", ips)
	}
	if cps := n.checkpoints(); len(cps) != 3 {
		t.Errorf("checkpoints: %v, want one per running pod (3)", cps)
	}
}
