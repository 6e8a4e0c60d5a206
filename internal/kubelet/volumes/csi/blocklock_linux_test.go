package csi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestBlockDeviceLock maps a real block device (a loop device over a
// sparse file stands in for the driver's) as upstream's MapBlockVolume: the
// device bind-mounted on the pod's global map file with a loop device on
// it; mapping again adds nothing; unmapping detaches the loop device and
// removes the file.
func TestBlockDeviceLock(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (loop devices, mounts); CI runs as root")
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 8<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		t.Fatalf("losetup: %v %s", err, out)
	}
	device := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", device).Run() })

	globalMap := filepath.Join(dir, "volumeDevices", "pv-1", "dev")
	mapFile := filepath.Join(globalMap, "pod-uid")
	for range 2 {
		if err := lockBlockDevice(device, globalMap, "pod-uid"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = unlockBlockDevice(globalMap, "pod-uid") })
	var dst, mst unix.Stat_t
	if err := unix.Stat(device, &dst); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(mapFile, &mst); err != nil {
		t.Fatal(err)
	}
	if mst.Mode&unix.S_IFMT != unix.S_IFBLK || mst.Rdev != dst.Rdev {
		t.Errorf("map file mode %o rdev %x, want the block device %x", mst.Mode, mst.Rdev, dst.Rdev)
	}
	loop, err := loopDeviceOf(mapFile)
	if err != nil || loop == "" {
		t.Fatalf("no loop device on the map file: %q %v", loop, err)
	}
	if n := countBacking(t, mapFile); n != 1 {
		t.Errorf("%d loop devices on the map file after two maps, want 1", n)
	}
	if err := unlockBlockDevice(globalMap, "pod-uid"); err != nil {
		t.Fatal(err)
	}
	if n := countBacking(t, mapFile); n != 0 {
		t.Errorf("%d loop devices left on the map file (%s was attached)", n, loop)
	}
	if _, err := os.Lstat(mapFile); !os.IsNotExist(err) {
		t.Errorf("map file left: %v", err)
	}
	if err := unlockBlockDevice(globalMap, "pod-uid"); err != nil {
		t.Errorf("unmap again: %v", err)
	}
	// Upstream's words when the device is gone.
	err = lockBlockDevice(filepath.Join(dir, "gone"), globalMap, "pod-2")
	want := "blkUtil.MapDevice failed. devicePath: " + filepath.Join(dir, "gone") + ", globalMapPath:" + globalMap + ", podUID: pod-2, bindMount: true: failed to bind mount devicePath: "
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("map of a missing device: %v, want %q...", err, want)
	}
	_ = os.Remove(filepath.Join(globalMap, "pod-2"))
}

// countBacking counts the loop devices whose backing file is path.
func countBacking(t *testing.T, path string) int {
	t.Helper()
	devices, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	n := 0
	for _, f := range devices {
		b, err := os.ReadFile(f)
		if err == nil && strings.TrimSpace(string(b)) == path {
			n++
		}
	}
	return n
}
