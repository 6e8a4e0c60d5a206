//go:build linux

package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/dockerd"
)

// buildFillerImages builds count images FROM busybox on d, each with mib MiB
// of random (incompressible) data, and returns their names.
func buildFillerImages(t *testing.T, d *dockerd.Daemon, count, mib int) []string {
	t.Helper()
	var names []string
	for i := range count {
		dir := t.TempDir()
		data := make([]byte, mib<<20)
		_, _ = rand.Read(data)
		if err := os.WriteFile(filepath.Join(dir, "data"), data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM "+busyboxImage+"\nCOPY data /data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("e2e-gc/filler-%02d:v1", i)
		if out, err := d.CLI(context.Background(), "build", "-q", "-t", name, dir); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		names = append(names, name)
	}
	return names
}

// present reports which of the images d still has.
func present(t *testing.T, d *dockerd.Daemon, images []string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, img := range images {
		_, err := d.CLI(context.Background(), "image", "inspect", img)
		out[img] = err == nil
	}
	return out
}

// TestIntegrationImageGC (issue 13): on a private dockerd whose data root is
// a small ext4 holding a dozen locally built images of 16Mi, a kubelet
// started with the disk above --image-gc-high-threshold removes unused
// images (never the pinned sandbox image, never the image of a running
// container) until the usage is down to --image-gc-low-threshold, no
// further, and counts each in kubelet_image_garbage_collected_total.
// (Least-recently-used order across uses needs the 5-minute GC period;
// the image manager's unit tests cover it.)
func TestIntegrationImageGC(t *testing.T) {
	requireSuite(t)
	d := dockerd.Start(t, dockerd.Options{Images: []string{pauseImage, busyboxImage}, DiskMiB: 512})
	fillers := buildFillerImages(t, d, 12, 16)
	n := newNode(t)
	n.runtime = []string{"--container-runtime=docker", "--docker-endpoint=" + d.Endpoint}
	n.rt = daemonView{d}
	inUse := fillers[3]
	n.writeManifest("user.yaml", manifest("user", "  containers:\n  - name: app\n    image: "+inUse+"\n    imagePullPolicy: Never\n    command: [sleep, \"3600\"]\n"))
	// First without image GC (the suite's default config), so that the
	// user's container exists before the collection.
	n.start()
	n.waitPod("user", podStartTimeout, "running", runningAndReady)
	n.kill9()

	capacity, avail := fsSpace(t, d.Disk)
	used := 100 - int(avail*100/capacity)
	high, low := used-2, used-12
	n.extra = append(n.extra, "--image-gc-high-threshold="+strconv.Itoa(high), "--image-gc-low-threshold="+strconv.Itoa(low),
		"--minimum-image-ttl-duration=0s")
	t.Logf("image filesystem %d%% used; GC thresholds high %d%%, low %d%%", used, high, low)
	n.start()
	var collected float64
	deadline := time.Now().Add(60 * time.Second)
	for collected == 0 && time.Now().Before(deadline) {
		collected, _ = n.metric(`kubelet_image_garbage_collected_total{reason="space"}`)
		time.Sleep(500 * time.Millisecond)
	}
	// Let a collection in progress finish: the count and the images gone
	// agree, twice in a row a second apart (deleting images on the loop
	// device may take a while on a loaded machine).
	gone := func(left map[string]bool) int {
		n := 0
		for _, img := range append([]string{busyboxImage}, fillers...) {
			if !left[img] {
				n++
			}
		}
		return n
	}
	for agreed, deadline := 0, time.Now().Add(60*time.Second); agreed < 2 && time.Now().Before(deadline); time.Sleep(time.Second) {
		collected, _ = n.metric(`kubelet_image_garbage_collected_total{reason="space"}`)
		if int(collected) == gone(present(t, d, append([]string{pauseImage, busyboxImage}, fillers...))) {
			agreed++
		} else {
			agreed = 0
		}
	}

	left := present(t, d, append([]string{pauseImage, busyboxImage}, fillers...))
	if !left[pauseImage] || !left[inUse] {
		t.Fatalf("the pinned sandbox image or the image in use was removed: %v", left)
	}
	removed := 0
	for _, f := range fillers {
		if !left[f] {
			removed++
		}
	}
	if removed == 0 || removed >= len(fillers)-1 {
		t.Errorf("%d of %d unused filler images removed, want some but not all (down to the low threshold only)", removed, len(fillers)-1)
	}
	if !left[busyboxImage] {
		removed++ // unused too (the fillers' base): it may go
	}
	if int(collected) != removed {
		t.Errorf("kubelet_image_garbage_collected_total{reason=space} = %v, want the %d removed images", collected, removed)
	}
	// Image sizes count their shared busybox layer once each: the disk ends
	// at most a few percent above the low threshold.
	capacity, avail = fsSpace(t, d.Disk)
	if after := 100 - int(avail*100/capacity); after > low+3 {
		t.Errorf("image filesystem %d%% used after the collection, want about the low threshold %d%%", after, low)
	}
	b, _ := os.ReadFile(n.kubelet.logPath)
	if !strings.Contains(string(b), "Removing image to free bytes") {
		t.Errorf("the kubelet did not log its image GC decisions")
	}
	n.waitPod("user", 5*time.Second, "still running", runningAndReady)
}
