//go:build linux

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// childrenOf returns pid -> state ('S', 'Z', ...) of every process whose
// parent is ppid, from /proc.
func childrenOf(t *testing.T, ppid int) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	kids := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid ...": comm may hold spaces and parens.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := bytes.Fields(stat[i+1:])
		if len(fields) < 2 {
			continue
		}
		if parent, err := strconv.Atoi(string(fields[1])); err == nil && parent == ppid {
			kids[pid] = string(fields[0])
		}
	}
	return kids
}

// TestIntegrationReapsChildrenAsPID1 runs pause as PID 1 of a new PID
// namespace (as in a pod sharing one) with a child it did not start itself
// (a shell backgrounds sleep, then execs pause), and checks that the exited
// child does not stay a zombie and that SIGTERM still ends pause with 0.
// Needs root (CLONE_NEWPID).
func TestIntegrationReapsChildrenAsPID1(t *testing.T) {
	bin := buildPause(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("sh not found: %v", err)
	}
	cmd := exec.Command(sh, "-c", "sleep 3 & exec "+bin) // long enough to be seen as a child
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start in a new PID namespace (needs root): %v", err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	pid := cmd.Process.Pid

	deadline := time.Now().Add(10 * time.Second)
	for len(childrenOf(t, pid)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the background sleep never appeared as a child of %d", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	deadline = time.Now().Add(15 * time.Second)
	for {
		kids := childrenOf(t, pid)
		if len(kids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("children of pause not reaped after sleep exited: %v (pid -> state)", kids)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if stderr.Len() != 0 {
		t.Errorf("pause as PID 1 printed %q; it should know it is PID 1", stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("signal: %v", err)
	}
	if code := waitExit(t, cmd, 5*time.Second); code != 0 {
		t.Fatalf("exit code after SIGTERM = %d, want 0", code)
	}
}
