//go:build linux

package nodestatus

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

func TestLinuxHostFromFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fstest.WriteTree(t, root, map[string]string{
		"proc/cpuinfo":                   "processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\n\nprocessor\t: 2\n",
		"proc/meminfo":                   "MemTotal:        8000000 kB\nMemFree:  100 kB\nMemAvailable:    6000000 kB\nHugePages_Total: 0\n",
		"proc/loadavg":                   "0.10 0.20 0.30 2/345 9999\n",
		"etc/os-release":                 "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n# comment\n",
		"etc/machine-id":                 "abc123\n",
		"proc/device-tree/system-id":     "uuid-from-dt\x00",
		"proc/sys/kernel/random/boot_id": "boot-xyz\n",
		"proc/sys/kernel/pid_max":        "4194304\n",
		"proc/sys/kernel/threads-max":    "62000\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":    "16\n",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages": "0\n",
	})
	h := linuxHost{root: root}
	m, err := h.machine(root)
	if err != nil {
		t.Fatalf("machine: %v", err)
	}
	if m.numCPU != 3 || m.memoryCapacity != 8000000*1024 || m.osImage != "Debian GNU/Linux 12 (bookworm)" ||
		m.machineID != "abc123" || m.systemUUID != "uuid-from-dt" || m.bootID != "boot-xyz" {
		t.Errorf("machine = %+v", m)
	}
	if m.fsCapacity <= 0 || m.kernelVersion == "" {
		t.Errorf("fsCapacity %d, kernel %q: want the real ones", m.fsCapacity, m.kernelVersion)
	}
	if m.hugePages[2*mi] != 32*mi || m.hugePages[gi] != 0 || len(m.hugePages) != 2 {
		t.Errorf("hugePages = %v", m.hugePages)
	}
	u, err := h.usage(filepath.Join(root, "does", "not", "exist"))
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	if u.memoryAvailable != 6000000*1024 || u.maxPID != 62000 || u.processes != 345 ||
		u.fsAvailable <= 0 || u.fsAvailable > u.fsCapacity || u.inodes <= 0 {
		t.Errorf("usage = %+v", u)
	}
}

func TestLinuxHostMissingFiles(t *testing.T) {
	t.Parallel()
	h := linuxHost{root: t.TempDir()}
	m, err := h.machine("/")
	if err == nil {
		t.Error("machine without /proc/meminfo: no error")
	}
	if m.numCPU != runtime.NumCPU() || m.osImage != "Linux" || m.machineID != "" {
		t.Errorf("fallbacks = %+v", m)
	}
	if _, err := h.usage("/"); err == nil {
		t.Error("usage without /proc: no error")
	}
}

func TestLinuxHostReal(t *testing.T) {
	t.Parallel()
	h := newHost()
	m, err := h.machine(t.TempDir())
	if err != nil {
		t.Fatalf("machine: %v", err)
	}
	if m.numCPU <= 0 || m.memoryCapacity <= 0 || m.fsCapacity <= 0 || m.bootID == "" || m.kernelVersion == "" {
		t.Errorf("machine = %+v", m)
	}
	u, err := h.usage(t.TempDir())
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	if u.memoryAvailable <= 0 || u.memoryAvailable > u.memoryCapacity || u.processes <= 0 || u.maxPID <= u.processes {
		t.Errorf("usage = %+v", u)
	}
}

func TestParseOSRelease(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc, in, want string
	}{
		{desc: "double quoted", in: `PRETTY_NAME="Ubuntu 22.04.4 LTS"`, want: "Ubuntu 22.04.4 LTS"},
		{desc: "single quoted", in: `PRETTY_NAME='Alpine'`, want: "Alpine"},
		{desc: "bare", in: "PRETTY_NAME=Arch", want: "Arch"},
		{desc: "missing", in: "NAME=x", want: ""},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			if got := parseOSRelease([]byte(test.in))["PRETTY_NAME"]; got != test.want {
				t.Errorf("PRETTY_NAME = %q, want %q", got, test.want)
			}
		})
	}
}
