package main

import (
	"bufio"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildPause builds the pause binary the way scripts/build-images.sh does and
// returns its path.
func buildPause(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go command not found in PATH: %v", err)
	}
	out := filepath.Join(t.TempDir(), "pause")
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags", "-s -w", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// waitExit waits for cmd to exit and returns its exit code, failing the test
// after timeout (the process is then killed).
func waitExit(t *testing.T, cmd *exec.Cmd, timeout time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return exitErr.ExitCode()
		}
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("pause did not exit within %v", timeout)
		return -1
	}
}

func TestBuildIsStatic(t *testing.T) {
	f, err := elf.Open(buildPause(t))
	if err != nil {
		t.Fatalf("open binary: %v", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatalf("binary has an ELF interpreter: it is dynamically linked")
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatalf("read imported libraries: %v", err)
	}
	if len(libs) != 0 {
		t.Fatalf("binary needs shared libraries %v", libs)
	}
}

func TestExitsZeroOnSignal(t *testing.T) {
	bin := buildPause(t)
	for _, tc := range []struct {
		desc string
		sig  syscall.Signal
	}{
		{desc: "SIGTERM", sig: syscall.SIGTERM},
		{desc: "SIGINT", sig: syscall.SIGINT},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cmd := exec.Command(bin)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatalf("stderr pipe: %v", err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatalf("start: %v", err)
			}
			// The startup line is printed after the signal handlers are
			// installed: a signal sent earlier would kill the process.
			line, err := bufio.NewReader(stderr).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "pause:") {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("startup line: %q, %v", line, err)
			}
			if err := cmd.Process.Signal(tc.sig); err != nil {
				t.Fatalf("signal: %v", err)
			}
			if code := waitExit(t, cmd, 5*time.Second); code != 0 {
				t.Fatalf("exit code after %s = %d, want 0", tc.desc, code)
			}
		})
	}
}
