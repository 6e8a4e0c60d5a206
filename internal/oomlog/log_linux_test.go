//go:build linux

package oomlog

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"golang.org/x/sys/unix"
)

// packetPipe is a pipe in packet mode: each write is one record and each read
// returns one, as /dev/kmsg does. The read end does not block.
func packetPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_DIRECT|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if err := unix.SetNonblock(p[0], true); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(p[0]), "kmsg-pipe"), os.NewFile(uintptr(p[1]), "kmsg-pipe-w")
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	return r, w
}

func oomRecord(seq int, memcg string) string {
	return "3," + strconv.Itoa(seq) + ",1,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=" + memcg + ",task_memcg=" + memcg + ",task=hog,pid=1,uid=0\n"
}

// TestLogReadsHistoryAndEachCall: the records present at open are read, and a
// record logged later is seen by the next Killed, without a follower running.
func TestLogReadsHistoryAndEachCall(t *testing.T) {
	r, w := packetPipe(t)
	for _, rec := range []string{"6,1,1,-;boot\n", oomRecord(2, "/docker/"+idA)} {
		if _, err := w.WriteString(rec); err != nil {
			t.Fatal(err)
		}
	}
	l, err := newLog(r, Options{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Killed(idA) {
		t.Error("a kill logged before Open is not known")
	}
	if l.Killed(idB) {
		t.Error("a kill not logged yet is known")
	}
	if _, err := w.WriteString(oomRecord(3, "/k/docker-"+idB+".scope")); err != nil {
		t.Fatal(err)
	}
	if !l.Killed(idB) {
		t.Error("Killed does not read what was logged since")
	}
}

// TestLogRunFollowsUntilCancelled: the follower reads records as they come
// (waiting in the poller, not in a blocked read), and returns once its
// context ends; Killed still answers from what was read.
func TestLogRunFollowsUntilCancelled(t *testing.T) {
	r, w := packetPipe(t)
	l, err := newLog(r, Options{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	if _, err := w.WriteString(oomRecord(4, "/docker/"+idA)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		l.mu.Lock()
		seen := l.killed.has(idA)
		l.mu.Unlock()
		if seen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the follower did not read the record within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if !l.Killed(idA) || l.Killed(idB) {
		t.Error("after Close, Killed does not answer from what was read")
	}
}

// TestOpenTheKernelLog opens the real /dev/kmsg (the tests run as root, as the
// kubelet does) and reads all it holds; an unknown container was not killed.
func TestOpenTheKernelLog(t *testing.T) {
	l, err := Open(DevKmsg, Options{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Killed(idA) {
		t.Errorf("container %s, which never ran, was OOM-killed", idA)
	}
}

// TestOpenFailsClearly: no device, a clear error.
func TestOpenFailsClearly(t *testing.T) {
	if _, err := Open("/nonexistent/kmsg", Options{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open of a missing device = %v, want a not-exist error", err)
	}
}

// BenchmarkOpenTheKernelLog: the cost of reading the whole kernel log at start.
func BenchmarkOpenTheKernelLog(b *testing.B) {
	for i := 0; i < b.N; i++ {
		l, err := Open(DevKmsg, Options{})
		if err != nil {
			b.Fatal(err)
		}
		_ = l.Close()
	}
}

// BenchmarkKilledNothingNew: the cost a status read pays when nothing new was logged.
func BenchmarkKilledNothingNew(b *testing.B) {
	l, err := Open(DevKmsg, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < b.N; i++ {
		l.Killed(idA)
	}
}

// TestLogOnKill: every kill is handed on, in order, those the log held at
// Open included; other records are not.
func TestLogOnKill(t *testing.T) {
	r, w := packetPipe(t)
	write := func(rec string) {
		t.Helper()
		if _, err := w.WriteString(rec); err != nil {
			t.Fatal(err)
		}
	}
	write(oomRecord(1, "/docker/"+idA))
	write("6,2,1,-;eth0: link up\n")
	var got []Kill
	l, err := newLog(r, Options{Logger: zaptest.NewLogger(t), OnKill: func(k Kill) { got = append(got, k) }})
	if err != nil {
		t.Fatal(err)
	}
	write("3,3,1,-;oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task_memcg=/system.slice/x.service,task=stress,pid=77,uid=0\n")
	l.Killed(idB)
	if len(got) != 2 || got[0].Seq != 1 || got[0].Container() != "/docker/"+idA || got[1].Seq != 3 || !got[1].Global || got[1].Task != "stress" || got[1].PID != 77 {
		t.Errorf("OnKill got %+v, want the kill of %s, then the system-wide kill of stress (77)", got, idA)
	}
}
