package stats

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"

	"github.com/kubelet-dockershim/kubelet/internal/procfs"
)

// machineInfo is what cAdvisor's machine collector serves, read once (the
// kubelet's cAdvisor serves its cached MachineInfo, without timestamps).
type machineInfo struct {
	labels                        string // boot_id="...",machine_id="...",system_uuid="..."
	physicalCores, cores, sockets int
	memory, swap                  uint64
	err                           bool // something could not be read: machine_scrape_error 1
}

// readMachineInfo reads the machine from procRoot (/proc), /etc and /sys:
// physical cores and sockets are the distinct "core id" and "physical id"
// values of cpuinfo, cores its processors, memory and swap meminfo's MemTotal
// and SwapTotal; the labels are the machine id, the DMI product UUID and the
// boot id.
func readMachineInfo(procRoot string) machineInfo {
	var m machineInfo
	cpuinfo, err := os.ReadFile(filepath.Join(procRoot, "cpuinfo"))
	if err != nil {
		m.err = true
	}
	m.physicalCores, m.sockets, m.cores = parseCPUInfo(cpuinfo)
	mem, err := os.ReadFile(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		m.err = true
	}
	kv := procfs.ParseKeyed(mem)
	m.memory, m.swap = kv["MemTotal"]*1024, kv["SwapTotal"]*1024
	machineID := firstFile("/etc/machine-id", "/var/lib/dbus/machine-id")
	uuid := firstFile("/sys/class/dmi/id/product_uuid", "/proc/device-tree/system-id", "/proc/device-tree/vm,uuid")
	bootID := firstFile(filepath.Join(procRoot, "sys/kernel/random/boot_id"))
	m.labels = `boot_id="` + escapeLabel(bootID) + `",machine_id="` + escapeLabel(machineID) + `",system_uuid="` + escapeLabel(uuid) + `"`
	return m
}

// parseCPUInfo counts the distinct "core id" and "physical id" values and the
// "processor" entries of /proc/cpuinfo.
func parseCPUInfo(b []byte) (physicalCores, sockets, processors int) {
	cores, pkgs := map[string]bool{}, map[string]bool{}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		switch string(bytes.TrimSpace(k)) {
		case "processor":
			processors++
		case "core id":
			cores[string(bytes.TrimSpace(v))] = true
		case "physical id":
			pkgs[string(bytes.TrimSpace(v))] = true
		}
	}
	return len(cores), len(pkgs), processors
}

// firstFile is the trimmed content of the first readable file, "" when none is.
func firstFile(paths ...string) string {
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			return strings.TrimSpace(strings.TrimRight(string(b), "\x00"))
		}
	}
	return ""
}

// writeMachine appends the machine families (sorted by name) and
// machine_scrape_error.
func writeMachine(buf []byte, m *machineInfo) []byte {
	for _, f := range []struct {
		name, help string
		v          float64
	}{
		{"machine_cpu_cores", "Number of logical CPU cores.", float64(m.cores)},
		{"machine_cpu_physical_cores", "Number of physical CPU cores.", float64(m.physicalCores)},
		{"machine_cpu_sockets", "Number of CPU sockets.", float64(m.sockets)},
		{"machine_memory_bytes", "Amount of memory installed on the machine.", float64(m.memory)},
	} {
		buf = appendHeader(buf, f.name, f.help, "gauge")
		buf = append(append(append(buf, f.name...), '{'), m.labels...)
		buf = appendValue(buf, f.v, -1)
	}
	buf = appendHeader(buf, "machine_scrape_error", "1 if there was an error while getting machine metrics, 0 otherwise.", "gauge")
	buf = appendBool(append(buf, "machine_scrape_error "...), m.err)
	buf = append(buf, '\n')
	buf = appendHeader(buf, "machine_swap_bytes", "Amount of swap memory available on the machine.", "gauge")
	buf = append(append(append(buf, "machine_swap_bytes"...), '{'), m.labels...)
	return appendValue(buf, float64(m.swap), -1)
}
