//go:build linux

package resources

import (
	"runtime"
	"testing"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

func TestMachineFromFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fstest.WriteTree(t, root, map[string]string{
		"proc/cpuinfo":                   "processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\n\nprocessor\t: 2\n",
		"proc/meminfo":                   "MemTotal:        8000000 kB\nMemFree:  100 kB\nMemAvailable:    6000000 kB\nSwapTotal:       1048572 kB\nHugePages_Total: 0\n",
		"etc/os-release":                 "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n# comment\n",
		"etc/machine-id":                 "abc123\n",
		"proc/device-tree/system-id":     "uuid-from-dt\x00",
		"proc/sys/kernel/random/boot_id": "boot-xyz\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":    "16\n",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages": "0\n",
	})
	m, err := hostReader{root: root}.machine(root)
	if err != nil {
		t.Fatalf("machine: %v", err)
	}
	if m.NumCPU != 3 || m.MemoryCapacity != 8000000*1024 || m.SwapCapacity != 1048572*1024 || m.OSImage != "Debian GNU/Linux 12 (bookworm)" ||
		m.MachineID != "abc123" || m.SystemUUID != "uuid-from-dt" || m.BootID != "boot-xyz" {
		t.Errorf("machine = %+v", m)
	}
	if m.RootFsCapacity <= 0 || m.KernelVersion == "" {
		t.Errorf("RootFsCapacity %d, kernel %q: want the real ones", m.RootFsCapacity, m.KernelVersion)
	}
	if m.HugePages[2*mi] != 32*mi || m.HugePages[gi] != 0 || len(m.HugePages) != 2 {
		t.Errorf("HugePages = %v", m.HugePages)
	}
}

func TestMachineMissingFiles(t *testing.T) {
	t.Parallel()
	m, err := hostReader{root: t.TempDir()}.machine("/")
	if err == nil {
		t.Error("machine without /proc/meminfo: no error")
	}
	if m.NumCPU != runtime.NumCPU() || m.OSImage != "Linux" || m.MachineID != "" {
		t.Errorf("fallbacks = %+v", m)
	}
}

func TestReadMachineReal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m, err := ReadMachine(dir + "/does/not/exist/yet")
	if err != nil {
		t.Fatalf("ReadMachine: %v", err)
	}
	if m.NumCPU <= 0 || m.MemoryCapacity <= 0 || m.RootFsCapacity <= 0 || m.BootID == "" || m.KernelVersion == "" {
		t.Errorf("machine = %+v", m)
	}
	fs, err := StatFilesystem(dir)
	if err != nil {
		t.Fatalf("StatFilesystem: %v", err)
	}
	if fs.Capacity != m.RootFsCapacity || fs.Available <= 0 || fs.Available > fs.Capacity || fs.Inodes <= 0 {
		t.Errorf("filesystem = %+v, machine root fs %d", fs, m.RootFsCapacity)
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
