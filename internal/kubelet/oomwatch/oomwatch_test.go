package oomwatch

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"golang.org/x/sys/unix"
)

const cid = "22e85ee948655927fd0d0580966520619216fc0b510e30d9c7e42c891969ad1d"

// kernelLog is a stand-in for /dev/kmsg: a pipe whose writes are packets (one
// record per read, as the device gives them), and the path that opens its
// read end.
func kernelLog(t *testing.T) (path string, write func(string)) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_DIRECT|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	return fmt.Sprintf("/proc/self/fd/%d", p[0]), func(rec string) {
		t.Helper()
		if _, err := w.WriteString(rec); err != nil {
			t.Fatal(err)
		}
	}
}

const (
	memcgKill  = "3,10,1,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kubepods/burstable/pod1,task_memcg=/kubepods/burstable/pod1/" + cid + ",task=tail,pid=300,uid=0\n"
	globalKill = "3,11,2,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/system.slice/db.service,task=stress,pid=77,uid=0\n"
	forged     = "12,12,3,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/,task=forged,pid=1,uid=0\n"
	laterKill  = "3,13,4,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/user.slice,task=java,pid=9001,uid=1000\n"
)

var node = &v1.ObjectReference{Kind: "Node", Name: "node-a", UID: "node-a"}

// TestWatcher: the kills the log held at start and those logged later are
// counted by upstream's name (the task's cgroup, "/" for system-wide kills);
// each system-wide one is a Warning SystemOOM event on the node with
// upstream's message; a memory cgroup's kill and a line a process wrote are
// not events.
func TestWatcher(t *testing.T) {
	path, write := kernelLog(t)
	write(memcgKill)
	write(globalKill)
	write(forged)
	rec := record.NewFakeRecorder(10)
	w := New(Options{Recorder: rec, NodeRef: node, Logger: zaptest.NewLogger(t), Path: path})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); w.Wait() }()
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	next := func() string {
		t.Helper()
		select {
		case e := <-rec.Events:
			return e
		case <-time.After(5 * time.Second):
			return "(none within 5s)"
		}
	}
	if got, want := next(), "Warning SystemOOM System OOM encountered, victim process: stress, pid: 77"; got != want {
		t.Errorf("event = %q, want %q", got, want)
	}
	write(laterKill)
	if got, want := next(), "Warning SystemOOM System OOM encountered, victim process: java, pid: 9001"; got != want {
		t.Errorf("event of a kill logged after start = %q, want %q", got, want)
	}
	select {
	case e := <-rec.Events:
		t.Errorf("unexpected event %q", e)
	default:
	}
	for name, want := range map[string]uint64{"/kubepods/burstable/pod1/" + cid: 1, "/": 2, "/kubepods/burstable/pod1": 0, "/system.slice/db.service": 0} {
		if got := w.Count(name); got != want {
			t.Errorf("Count(%q) = %d, want %d", name, got, want)
		}
	}
}

// TestWatcherUnreadableLog: without a kernel log the watcher does not start
// (upstream's kubelet does not), unless told to tolerate it (a user namespace
// with KubeletInUserNamespace); it then counts nothing.
func TestWatcherUnreadableLog(t *testing.T) {
	missing := t.TempDir() + "/kmsg"
	if err := New(Options{Path: missing}).Start(context.Background()); err == nil {
		t.Error("Start without a kernel log succeeded, want an error")
	}
	w := New(Options{Path: missing, TolerateUnreadable: true, Logger: zaptest.NewLogger(t)})
	if err := w.Start(context.Background()); err != nil {
		t.Errorf("Start told to tolerate it = %v", err)
	}
	w.Wait()
	if got := w.Count("/"); got != 0 {
		t.Errorf("Count = %d, want 0", got)
	}
}
