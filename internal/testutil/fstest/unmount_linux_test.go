package fstest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Bind mounts below a directory, nested too, are gone after UnmountUnder and
// the directory can be removed; a mount beside it stays.
func TestUnmountUnder(t *testing.T) {
	base := t.TempDir()
	src, dir, beside := filepath.Join(base, "src"), filepath.Join(base, "dir"), filepath.Join(base, "dir2")
	WriteTree(t, src, map[string]string{"b/f": ""})
	WriteTree(t, dir, map[string]string{"m/f": ""})
	WriteTree(t, beside, map[string]string{"f": ""})
	// dir/m, and dir/m/b below it (src/b seen through the first mount).
	for _, mp := range []string{filepath.Join(dir, "m"), filepath.Join(dir, "m", "b"), beside} {
		if err := unix.Mount(src, mp, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind mount %s (needs root): %v", mp, err)
		}
	}
	t.Cleanup(func() { _ = unix.Unmount(beside, unix.MNT_DETACH) })
	if err := UnmountUnder(dir); err != nil {
		t.Fatal(err)
	}
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mountinfo), dir+"/") {
		t.Fatalf("mounts left under %s", dir)
	}
	if !strings.Contains(string(mountinfo), " "+beside+" ") {
		t.Fatalf("the mount beside %s was removed", dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}
