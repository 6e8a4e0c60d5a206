//go:build faultinject

package faultinject

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Kill sends SIGKILL to the process when KillFile next to the executable
// names name. The file is read at every call: the test may write it while
// the process runs.
func Kill(name string) {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(exe), KillFile))
	if err != nil || strings.TrimSpace(string(b)) != name {
		return
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}
