//go:build linux

package eviction

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/cgroups"
)

const (
	mib = 1 << 20
	// fireTimeout bounds how long a crossing may take to reach fire.
	fireTimeout = 10 * time.Second
	// returnTimeout bounds how long Run may take to return after ctx or Close.
	returnTimeout = 2 * time.Second
)

// TestMemoryThresholdNotifierHost arms thresholds on private memory cgroups of this
// host and charges them with tmpfs pages written by a child process. It needs root.
// On a cgroup v2 host it checks that New refuses; a v1 or hybrid host without the
// memory controller fails the test.
func TestMemoryThresholdNotifierHost(t *testing.T) {
	t.Parallel()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := cgroups.ParseMountinfo(strings.NewReader(string(mi)))
	if err != nil {
		t.Fatal(err)
	}
	mnt, ok := mounts.V1["memory"]
	if !ok {
		if mounts.Mode() != cgroups.ModeV2 {
			t.Fatalf("cgroup mode %v without a v1 memory controller", mounts.Mode())
		}
		n, err := newMemcgNotifier("/", 1)
		if !errors.Is(err, cgroups.ErrMemcgNotificationUnsupported) {
			if n != nil {
				n.Close()
			}
			t.Fatalf("newMemcgNotifier on cgroup v2 = %v, want cgroups.ErrMemcgNotificationUnsupported", err)
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create memory cgroups and mount tmpfs")
	}
	t.Run("fires when usage crosses the threshold", func(t *testing.T) {
		t.Parallel()
		testThresholdFires(t, mnt)
	})
	t.Run("does not fire below the threshold", func(t *testing.T) {
		t.Parallel()
		testThresholdStaysQuiet(t, mnt)
	})
	t.Run("Run returns after ctx cancel", func(t *testing.T) {
		t.Parallel()
		testThresholdCancel(t, mnt)
	})
	t.Run("Close while Run is blocked", func(t *testing.T) {
		t.Parallel()
		testThresholdCloseWhileRunning(t, mnt)
	})
	t.Run("removing the cgroup ends Run", func(t *testing.T) {
		t.Parallel()
		testThresholdCgroupRemoved(t, mnt)
	})
	t.Run("missing cgroup is gone", func(t *testing.T) {
		t.Parallel()
		n, err := newMemcgNotifier(fmt.Sprintf("/memthreshold-missing-%x", rand.Uint64()), mib)
		if !errors.Is(err, cgroups.ErrGone) || !errors.Is(err, fs.ErrNotExist) {
			if n != nil {
				n.Close()
			}
			t.Fatalf("newMemcgNotifier(missing) = %v, want cgroups.ErrGone and fs.ErrNotExist", err)
		}
	})
}

func testThresholdFires(t *testing.T, mnt cgroups.Mount) {
	rel, dir := newTestMemoryCgroup(t, mnt)
	n := newTestNotifier(t, rel, usageOf(t, dir)+8*mib)
	fired := make(chan struct{}, 1)
	var count atomic.Int64
	ran := startRun(t, n, context.Background(), func() {
		count.Add(1)
		select {
		case fired <- struct{}{}:
		default:
		}
	})
	child := chargeCgroup(t, dir, mountTmpfs(t), 32)
	select {
	case <-fired:
	case <-time.After(fireTimeout):
		t.Fatalf("no fire within %v; usage is %d bytes", fireTimeout, usageOf(t, dir))
	}
	if err := child.wait(fireTimeout); err != nil {
		t.Fatalf("charging child: %v", err)
	}
	closeTwice(t, n)
	waitReturned(t, ran, "Close")
	if err := n.Err(); err != nil {
		t.Errorf("Err() = %v after Close, want nil", err)
	}
	t.Logf("fired %d time(s); usage %d bytes", count.Load(), usageOf(t, dir))
}

// testThresholdStaysQuiet arms a low and a high threshold on one cgroup and charges
// it between the two: the low one firing shows the kernel checked the thresholds,
// and the high one must stay quiet.
func testThresholdStaysQuiet(t *testing.T, mnt cgroups.Mount) {
	rel, dir := newTestMemoryCgroup(t, mnt)
	base := usageOf(t, dir)
	low := newTestNotifier(t, rel, base+4*mib)
	high := newTestNotifier(t, rel, base+256*mib)
	lowFired := make(chan struct{}, 1)
	var highCount atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lowRan := startRun(t, low, ctx, func() {
		select {
		case lowFired <- struct{}{}:
		default:
		}
	})
	highRan := startRun(t, high, ctx, func() { highCount.Add(1) })
	child := chargeCgroup(t, dir, mountTmpfs(t), 16)
	if err := child.wait(fireTimeout); err != nil {
		t.Fatalf("charging child: %v", err)
	}
	if usage := usageOf(t, dir); usage < base+16*mib {
		t.Fatalf("usage %d bytes after writing 16 MiB, want at least %d: tmpfs pages were not charged", usage, base+16*mib)
	}
	select {
	case <-lowFired:
	case <-time.After(fireTimeout):
		t.Fatalf("low threshold did not fire within %v", fireTimeout)
	}
	time.Sleep(200 * time.Millisecond) // let a wrong high notification reach fire
	cancel()
	waitReturned(t, lowRan, "ctx cancel")
	waitReturned(t, highRan, "ctx cancel")
	if got := highCount.Load(); got != 0 {
		t.Errorf("high threshold fired %d time(s) with usage %d bytes below %d", got, usageOf(t, dir), base+256*mib)
	}
}

func testThresholdCancel(t *testing.T, mnt cgroups.Mount) {
	rel, _ := newTestMemoryCgroup(t, mnt)
	n := newTestNotifier(t, rel, 64*mib)
	ctx, cancel := context.WithCancel(context.Background())
	ran := startRun(t, n, ctx, func() { t.Error("fire called without a crossing") })
	time.Sleep(50 * time.Millisecond) // let Run block in epoll_wait
	start := time.Now()
	cancel()
	waitReturned(t, ran, "ctx cancel")
	t.Logf("Run returned %v after cancel", time.Since(start))
	if err := n.Err(); err != nil {
		t.Errorf("Err() = %v after cancel, want nil", err)
	}
	// The notifier is still open: a second Run works until its own ctx ends.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel2()
	waitReturned(t, startRun(t, n, ctx2, func() {}), "ctx deadline")
	closeTwice(t, n)
	checkReleased(t, n)
	// Run after Close returns at once.
	waitReturned(t, startRun(t, n, context.Background(), func() {}), "an earlier Close")
}

func testThresholdCloseWhileRunning(t *testing.T, mnt cgroups.Mount) {
	rel, _ := newTestMemoryCgroup(t, mnt)
	n := newTestNotifier(t, rel, 64*mib)
	ran := startRun(t, n, context.Background(), func() { t.Error("fire called without a crossing") })
	time.Sleep(50 * time.Millisecond) // let Run block in epoll_wait
	closeTwice(t, n)
	waitReturned(t, ran, "Close")
	checkReleased(t, n)
	if err := n.Close(); err != nil {
		t.Errorf("Close after Run returned = %v, want nil", err)
	}
}

func testThresholdCgroupRemoved(t *testing.T, mnt cgroups.Mount) {
	rel, dir := newTestMemoryCgroup(t, mnt)
	n := newTestNotifier(t, rel, 64*mib)
	ran := startRun(t, n, context.Background(), func() { t.Error("fire called for the cgroup's removal") })
	time.Sleep(50 * time.Millisecond)
	if err := unix.Rmdir(dir); err != nil {
		t.Fatalf("rmdir %s: %v", dir, err)
	}
	waitReturned(t, ran, "the cgroup's removal")
	if err := n.Err(); !errors.Is(err, cgroups.ErrGone) {
		t.Errorf("Err() = %v after the cgroup was removed, want cgroups.ErrGone", err)
	}
}

// newTestMemoryCgroup creates a memory cgroup under the root of mnt and removes it
// in cleanup; it returns the path relative to the mount and the directory.
func newTestMemoryCgroup(t *testing.T, mnt cgroups.Mount) (rel, dir string) {
	t.Helper()
	rel = fmt.Sprintf("/memthreshold-test-%d-%x", os.Getpid(), rand.Uint64())
	dir = filepath.Join(mnt.Mountpoint, rel)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatalf("create memory cgroup: %v", err)
	}
	t.Cleanup(func() { removeCgroup(t, dir) })
	return rel, dir
}

// removeCgroup removes an empty cgroup, retrying while its last task is exiting.
func removeCgroup(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := unix.Rmdir(dir)
		if err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			t.Errorf("remove cgroup %s: %v", dir, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func newTestNotifier(t *testing.T, rel string, threshold uint64) *memcgNotifier {
	t.Helper()
	n, err := newMemcgNotifier(rel, int64(threshold))
	if err != nil {
		t.Fatalf("newMemcgNotifier(%q, %d): %v", rel, threshold, err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

func usageOf(t *testing.T, dir string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// mountTmpfs mounts a private tmpfs on a temporary directory; its pages are charged
// to the memory cgroup of the process that writes them.
func mountTmpfs(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64m"); err != nil {
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount tmpfs %s: %v", dir, err)
		}
	})
	return dir
}

// child is a process started by chargeCgroup.
type child struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once Wait returned
	err  error         // Wait's result, set before done is closed
}

// wait waits for the child to exit by itself.
func (c *child) wait(timeout time.Duration) error {
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		return fmt.Errorf("pid %d still running after %v", c.cmd.Process.Pid, timeout)
	}
}

// chargeCgroup starts a shell that blocks on its stdin, moves it into the memory
// cgroup dir, and only then lets it write sizeMiB MiB into a file on tmpfsDir. Cleanup
// kills the child by PID and reaps it.
func chargeCgroup(t *testing.T, dir, tmpfsDir string, sizeMiB int) *child {
	t.Helper()
	file := filepath.Join(tmpfsDir, "charge")
	script := `read -r go && head -c "$1" /dev/zero > "$2"`
	cmd := exec.Command("/bin/sh", "-c", script, "sh", strconv.Itoa(sizeMiB*mib), file)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		if err != nil && stderr.Len() > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
		}
		c.err = err
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = unix.Kill(cmd.Process.Pid, unix.SIGKILL) // ESRCH once it exited; Wait below reaps
		<-c.done
	})
	procs := filepath.Join(dir, "cgroup.procs")
	if err := os.WriteFile(procs, []byte(strconv.Itoa(cmd.Process.Pid)), 0); err != nil {
		t.Fatalf("move pid %d into %s: %v", cmd.Process.Pid, procs, err)
	}
	if _, err := stdin.Write([]byte("go\n")); err != nil {
		t.Fatalf("release the charging child: %v", err)
	}
	_ = stdin.Close()
	return c
}

// startRun runs n in a goroutine; the channel is closed when Run returns.
func startRun(t *testing.T, n *memcgNotifier, ctx context.Context, fire func()) <-chan struct{} {
	t.Helper()
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		n.Run(ctx, fire)
	}()
	t.Cleanup(func() {
		_ = n.Close()
		<-ran
	})
	return ran
}

func waitReturned(t *testing.T, ran <-chan struct{}, after string) {
	t.Helper()
	select {
	case <-ran:
	case <-time.After(returnTimeout):
		t.Fatalf("Run still running %v after %s", returnTimeout, after)
	}
}

func closeTwice(t *testing.T, n *memcgNotifier) {
	t.Helper()
	for i := range 2 {
		if err := n.Close(); err != nil {
			t.Errorf("Close #%d: %v", i+1, err)
		}
	}
}

// checkReleased checks that every descriptor of a closed notifier whose Run returned
// has been released.
func checkReleased(t *testing.T, n *memcgNotifier) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fds != noFDs() {
		t.Errorf("descriptors %+v after Close, want all -1", n.fds)
	}
	if fd := n.threshold.EventFD(); fd != -1 {
		t.Errorf("the threshold's eventfd %d after Close, want -1", fd)
	}
}
