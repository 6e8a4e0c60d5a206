package netns

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// nsInode is the inode of a network namespace file (a /proc link or a pin).
func nsInode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatalf("stat %s: %v", path, err)
	}
	return st.Ino
}

// TestPinOutlivesProcess: a namespace pinned while its process runs is the
// same namespace after the process is gone, until unpinned.
func TestPinOutlivesProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (unshare -n, mount): run the suite as root")
	}
	cmd := exec.Command("unshare", "-n", "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatalf("unshare: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	procNS := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/net"
	// unshare execs sleep once the namespace exists.
	deadline := time.Now().Add(5 * time.Second)
	for nsInode(t, procNS) == nsInode(t, "/proc/self/ns/net") {
		if time.Now().After(deadline) {
			t.Fatal("unshare -n did not create a namespace")
		}
		time.Sleep(10 * time.Millisecond)
	}
	want := nsInode(t, procNS)

	pins, err := New(filepath.Join(t.TempDir(), "netns"))
	if err != nil {
		t.Fatal(err)
	}
	const id = "0123abcd"
	if got := pins.Path(id); got != "" {
		t.Fatalf("Path before Pin = %q", got)
	}
	path, err := pins.Pin(id, cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pins.Unpin(id) })
	if pins.Path(id) != path || nsInode(t, path) != want {
		t.Fatalf("pin %s does not hold the process's namespace", path)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if pins.Path(id) != path || nsInode(t, path) != want {
		t.Fatal("the pinned namespace went with its process")
	}
	// Pinning again (a retried sandbox start) replaces the pin.
	if _, err := pins.Pin(id, os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if nsInode(t, path) != nsInode(t, "/proc/self/ns/net") {
		t.Fatal("a second Pin did not replace the first")
	}
	if ids, err := pins.List(); err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("List = %v, %v", ids, err)
	}
	if err := pins.Unpin(id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) || pins.Path(id) != "" {
		t.Fatalf("pin still there after Unpin: %v", err)
	}
	if err := pins.Unpin(id); err != nil {
		t.Fatalf("second Unpin = %v, want nil", err)
	}
}

// TestStalePinFile: a pin file without its mount (the host rebooted) is no
// pin, and Unpin removes it.
func TestStalePinFile(t *testing.T) {
	pins, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pins.Dir(), "abc"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	if got := pins.Path("abc"); got != "" {
		t.Fatalf("Path of an unmounted pin file = %q, want \"\"", got)
	}
	if err := pins.Unpin("abc"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(pins.Dir(), "abc")); !os.IsNotExist(err) {
		t.Fatalf("stale pin file not removed: %v", err)
	}
}

func TestInvalidPins(t *testing.T) {
	pins, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"", ".", "..", "../x", "a/b", "a\x00b"} {
		if _, err := pins.Pin(id, os.Getpid()); err == nil {
			t.Errorf("Pin(%q) succeeded", id)
		}
		if err := pins.Unpin(id); err == nil {
			t.Errorf("Unpin(%q) succeeded", id)
		}
		if p := pins.Path(id); p != "" {
			t.Errorf("Path(%q) = %q", id, p)
		}
	}
	if _, err := pins.Pin("abc", 0); err == nil {
		t.Error("Pin with pid 0 succeeded")
	}
	if _, err := New("relative/dir"); err == nil {
		t.Error("New with a relative dir succeeded")
	}
}
