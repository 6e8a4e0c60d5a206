//go:build faultinject

package faultinject

import (
	"os"
	"path/filepath"
	"strings"
)

// Enabled reports whether this is a fault-injection build (-tags faultinject).
const Enabled = true

// Point panics when TriggerFile next to the executable names name. The file is
// read at every call: the test may write it while the process runs.
func Point(name string) {
	exe, err := os.Executable()
	if err != nil {
		return
	}
	b, err := os.ReadFile(filepath.Join(filepath.Dir(exe), TriggerFile))
	if err != nil || strings.TrimSpace(string(b)) != name {
		return
	}
	panic("faultinject: injected panic at " + name)
}
