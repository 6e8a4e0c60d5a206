package containerlog

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
)

// A log file that cannot be written (the disk is full: here the log path is
// /dev/full, whose writes fail with ENOSPC) does not stop the copier while
// the container runs: once there is room (the device node is gone, so a
// regular file is created) it copies again from the last entry written, and
// no line is lost.
func TestWriteFailureRetriedUntilThereIsRoom(t *testing.T) {
	path := logPath(t)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(path, unix.S_IFCHR|0o640, int(unix.Mkdev(1, 7))); err != nil {
		t.Fatalf("mknod /dev/full at the log path: %v", err)
	}
	stream := muxStream(message{stdoutID, t0, "one\n"}, message{stderrID, t0.Add(time.Millisecond), "two\n"})
	src := &fakeSource{
		results: []func(context.Context) (io.ReadCloser, error){canned(stream)},
		states:  []func() (libdocker.ContainerJSON, error){running},
	}
	m := newManager(t, src)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m.Follow(ctx, "c1", path, false)
	waitFor(t, "two copies that failed to write", func() bool { return len(src.Calls()) >= 2 })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lines once there is room", fileContains(path, "two"))
	m.Stop("c1")
	if err := m.Wait(ctx, "c1"); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), " F one\n") != 1 || strings.Count(string(b), " F two\n") != 1 {
		t.Fatalf("log after the disk had room again:\n%s\nwant one and two, once each", b)
	}
}
