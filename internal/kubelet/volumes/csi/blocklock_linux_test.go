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

	mapFile := filepath.Join(dir, "volumeDevices", "pv-1", "dev", "pod-uid")
	for range 2 {
		if err := lockBlockDevice(device, mapFile); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = unlockBlockDevice(mapFile) })
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
	if err := unlockBlockDevice(mapFile); err != nil {
		t.Fatal(err)
	}
	if n := countBacking(t, mapFile); n != 0 {
		t.Errorf("%d loop devices left on the map file (%s was attached)", n, loop)
	}
	if _, err := os.Lstat(mapFile); !os.IsNotExist(err) {
		t.Errorf("map file left: %v", err)
	}
	if err := unlockBlockDevice(mapFile); err != nil {
		t.Errorf("unmap again: %v", err)
	}
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
