//go:build linux

package nodestatus

import (
	"path/filepath"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

func TestLinuxHostFromFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fstest.WriteTree(t, root, map[string]string{
		"proc/meminfo":                "MemTotal:        8000000 kB\nMemFree:  100 kB\nMemAvailable:    6000000 kB\nHugePages_Total: 0\n",
		"proc/loadavg":                "0.10 0.20 0.30 2/345 9999\n",
		"proc/sys/kernel/pid_max":     "4194304\n",
		"proc/sys/kernel/threads-max": "62000\n",
	})
	h := linuxHost{root: root}
	u, err := h.usage(filepath.Join(root, "does", "not", "exist"))
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	if u.memoryCapacity != 8000000*1024 || u.memoryAvailable != 6000000*1024 || u.maxPID != 62000 || u.processes != 345 ||
		u.fsAvailable <= 0 || u.fsAvailable > u.fsCapacity || u.inodes <= 0 {
		t.Errorf("usage = %+v", u)
	}
}

func TestLinuxHostMissingFiles(t *testing.T) {
	t.Parallel()
	h := linuxHost{root: t.TempDir()}
	if _, err := h.usage("/"); err == nil {
		t.Error("usage without /proc: no error")
	}
}

func TestLinuxHostReal(t *testing.T) {
	t.Parallel()
	u, err := newHost().usage(t.TempDir())
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	if u.memoryAvailable <= 0 || u.memoryAvailable > u.memoryCapacity || u.processes <= 0 || u.maxPID <= u.processes {
		t.Errorf("usage = %+v", u)
	}
}
