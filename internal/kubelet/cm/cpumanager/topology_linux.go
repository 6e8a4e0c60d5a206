package cpumanager

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/utils/cpuset"
)

var (
	cpuDirName  = regexp.MustCompile(`^cpu([0-9]+)$`)
	nodeDirName = regexp.MustCompile(`^node([0-9]+)$`)
)

// DiscoverTopology reads the CPU topology below sysfsRoot (normally "/sys"):
// the online logical CPUs (devices/system/cpu/online, every cpuN with a
// topology directory when that file is missing), their socket
// (topology/physical_package_id) and core (topology/core_id), and the NUMA
// node of each (devices/system/node/nodeN/cpulist). As cAdvisor, which
// upstream's kubelet asks, does, the socket ID stands in for the NUMA node ID
// on kernels without devices/system/node.
func DiscoverTopology(sysfsRoot string) (*Topology, error) {
	cpuRoot := filepath.Join(sysfsRoot, "devices", "system", "cpu")
	cpus, err := onlineCPUs(cpuRoot)
	if err != nil {
		return nil, err
	}
	numaOf, err := numaNodesOfCPUs(filepath.Join(sysfsRoot, "devices", "system", "node"))
	if err != nil {
		return nil, err
	}

	type coreKey struct{ node, socket, core int }
	type placed struct {
		cpu int
		key coreKey
	}
	var all []placed
	lowest := map[coreKey]int{}
	for _, cpu := range cpus.List() {
		dir := filepath.Join(cpuRoot, "cpu"+strconv.Itoa(cpu), "topology")
		socket, err := readIntFile(filepath.Join(dir, "physical_package_id"))
		if err != nil {
			return nil, err
		}
		core, err := readIntFile(filepath.Join(dir, "core_id"))
		if err != nil {
			return nil, err
		}
		node := socket
		if numaOf != nil {
			n, ok := numaOf[cpu]
			if !ok {
				return nil, fmt.Errorf("cpu %d is online but in no NUMA node", cpu)
			}
			node = n
		}
		k := coreKey{node: node, socket: socket, core: core}
		all = append(all, placed{cpu: cpu, key: k})
		if low, ok := lowest[k]; !ok || cpu < low {
			lowest[k] = cpu
		}
	}

	nodeCPUs := map[int]int{}
	for _, p := range all {
		nodeCPUs[p.key.node]++
	}
	uncore := map[coreKey]int{}
	for k, cpu := range lowest {
		id, ok := uncoreCacheID(filepath.Join(cpuRoot, "cpu"+strconv.Itoa(cpu), "cache"), nodeCPUs[k.node])
		if !ok {
			id = k.socket
		}
		uncore[k] = id
	}
	details := CPUDetails{}
	for _, p := range all {
		details[p.cpu] = CPUInfo{NUMANodeID: p.key.node, SocketID: p.key.socket, CoreID: lowest[p.key], UncoreCacheID: uncore[p.key]}
	}
	return NewTopology(details)
}

// uncoreCacheID is, as cAdvisor finds a core's uncore cache, the id of the
// first cache of cacheDir (cpuN/cache) whose level is above 2 and that fewer
// or more CPUs than the NUMA node's nodeCPUs share; ok is false when there is
// none or the files cannot be read (the caller falls back to the socket).
func uncoreCacheID(cacheDir string, nodeCPUs int) (id int, ok bool) {
	entries, err := os.ReadDir(cacheDir)
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "index") {
			continue
		}
		dir := filepath.Join(cacheDir, e.Name())
		level, err := readIntFile(filepath.Join(dir, "level"))
		if err != nil || level <= 2 {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, "shared_cpu_list"))
		if err != nil {
			continue
		}
		shared, err := cpuset.Parse(strings.TrimSpace(string(data)))
		if err != nil || shared.Size() == nodeCPUs {
			continue // the whole node's cache
		}
		if id, err := readIntFile(filepath.Join(dir, "id")); err == nil {
			return id, true
		}
	}
	return 0, false
}

// onlineCPUs returns the online CPUs: the list in cpuRoot/online, or every
// cpuN directory with a topology subdirectory when the file does not exist.
func onlineCPUs(cpuRoot string) (cpuset.CPUSet, error) {
	data, err := os.ReadFile(filepath.Join(cpuRoot, "online"))
	if err == nil {
		set, perr := cpuset.Parse(strings.TrimSpace(string(data)))
		if perr != nil {
			return cpuset.New(), fmt.Errorf("parse %s: %w", filepath.Join(cpuRoot, "online"), perr)
		}
		return set, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return cpuset.New(), err
	}
	entries, err := os.ReadDir(cpuRoot)
	if err != nil {
		return cpuset.New(), fmt.Errorf("list cpus: %w", err)
	}
	var ids []int
	for _, e := range entries {
		m := cpuDirName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(cpuRoot, e.Name(), "topology")); err != nil {
			continue // offline CPUs have no topology directory
		}
		id, _ := strconv.Atoi(m[1])
		ids = append(ids, id)
	}
	return cpuset.New(ids...), nil
}

// numaNodesOfCPUs maps each CPU to its NUMA node from nodeRoot/nodeN/cpulist.
// It returns nil (no error) when nodeRoot does not exist.
func numaNodesOfCPUs(nodeRoot string) (map[int]int, error) {
	entries, err := os.ReadDir(nodeRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list NUMA nodes: %w", err)
	}
	out := map[int]int{}
	for _, e := range entries {
		m := nodeDirName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		node, _ := strconv.Atoi(m[1])
		path := filepath.Join(nodeRoot, e.Name(), "cpulist")
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		set, err := cpuset.Parse(strings.TrimSpace(string(data)))
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		for _, cpu := range set.UnsortedList() {
			out[cpu] = node
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func readIntFile(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return 0, fmt.Errorf("parse %s: %w", path, err)
	}
	return v, nil
}
