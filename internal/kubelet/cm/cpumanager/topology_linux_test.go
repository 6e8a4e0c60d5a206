package cpumanager

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
)

// fakeCPU is one CPU of a fake sysfs tree: its sysfs socket and core_id.
type fakeCPU struct{ socket, coreID int }

// writeSysfs builds a fake sysfs below a temp dir: devices/system/cpu/online
// (unless online is "-"), cpuN/topology for every CPU and
// devices/system/node/nodeN/cpulist for every NUMA node (none when nodes is
// nil).
func writeSysfs(t *testing.T, cpus []fakeCPU, online string, nodes map[int]string) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cpuDir := filepath.Join("devices", "system", "cpu")
	if online != "-" {
		write(filepath.Join(cpuDir, "online"), online)
	}
	write(filepath.Join(cpuDir, "kernel_max"), "8191")
	for id, c := range cpus {
		dir := filepath.Join(cpuDir, "cpu"+strconv.Itoa(id), "topology")
		write(filepath.Join(dir, "physical_package_id"), strconv.Itoa(c.socket))
		write(filepath.Join(dir, "core_id"), strconv.Itoa(c.coreID))
	}
	if err := os.MkdirAll(filepath.Join(root, cpuDir, "cpufreq"), 0o755); err != nil {
		t.Fatal(err)
	}
	for node, list := range nodes {
		write(filepath.Join("devices", "system", "node", "node"+strconv.Itoa(node), "cpulist"), list)
	}
	if nodes != nil {
		write(filepath.Join("devices", "system", "node", "online"), "0")
	}
	return root
}

func TestDiscoverTopology(t *testing.T) {
	t.Parallel()
	dual := make([]fakeCPU, 12)
	for cpu := range dual {
		// sysfs core_id restarts on every socket.
		dual[cpu] = fakeCPU{socket: cpu % 2, coreID: (cpu % 6) / 2}
	}
	for _, test := range []struct {
		desc    string
		cpus    []fakeCPU
		online  string
		nodes   map[int]string
		want    CPUDetails
		wantNum [4]int // CPUs, cores, sockets, NUMA nodes
	}{
		{
			desc:    "2 CPUs, 1 socket, no SMT",
			cpus:    []fakeCPU{{0, 0}, {0, 1}},
			online:  "0-1",
			nodes:   map[int]string{0: "0-1"},
			want:    twoCPUs,
			wantNum: [4]int{2, 2, 1, 1},
		},
		{
			desc:    "8 CPUs, 1 socket, SMT",
			cpus:    []fakeCPU{{0, 0}, {0, 1}, {0, 2}, {0, 3}, {0, 0}, {0, 1}, {0, 2}, {0, 3}},
			online:  "0-7",
			nodes:   map[int]string{0: "0-7"},
			want:    eightCPUsSMT,
			wantNum: [4]int{8, 4, 1, 1},
		},
		{
			desc:    "2 sockets, 2 NUMA nodes, SMT",
			cpus:    dual,
			online:  "0-11",
			nodes:   map[int]string{0: "0,2,4,6,8,10", 1: "1,3,5,7,9,11"},
			want:    dualSocketSMT,
			wantNum: [4]int{12, 6, 2, 2},
		},
		{
			desc:    "no NUMA information: the socket stands in",
			cpus:    dual,
			online:  "0-11",
			want:    dualSocketSMT,
			wantNum: [4]int{12, 6, 2, 2},
		},
		{
			desc:    "no online file: every CPU with a topology directory",
			cpus:    []fakeCPU{{0, 0}, {0, 1}},
			online:  "-",
			nodes:   map[int]string{0: "0-1"},
			want:    twoCPUs,
			wantNum: [4]int{2, 2, 1, 1},
		},
		{
			desc:    "offline CPU left out",
			cpus:    []fakeCPU{{0, 0}, {0, 1}, {0, 2}},
			online:  "0-1",
			nodes:   map[int]string{0: "0-2"},
			want:    twoCPUs,
			wantNum: [4]int{2, 2, 1, 1},
		},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			root := writeSysfs(t, test.cpus, test.online, test.nodes)
			topo, err := DiscoverTopology(root)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(topo.CPUDetails, test.want) {
				t.Errorf("details = %v, want %v", topo.CPUDetails, test.want)
			}
			got := [4]int{topo.NumCPUs, topo.NumCores, topo.NumSockets, topo.NumNUMANodes}
			if got != test.wantNum {
				t.Errorf("counts = %v, want %v", got, test.wantNum)
			}
		})
	}
}

// TestDiscoverUncoreCaches: a level 3 cache shared by part of the NUMA node
// is the CPUs' uncore cache (cAdvisor's); one shared by the whole node, or no
// cache information, leaves the socket standing in.
func TestDiscoverUncoreCaches(t *testing.T) {
	t.Parallel()
	cpus := make([]fakeCPU, 8)
	for cpu := range cpus {
		cpus[cpu] = fakeCPU{socket: 0, coreID: cpu}
	}
	writeCache := func(root string, cpu int, index string, level int, shared string, id int) {
		dir := filepath.Join(root, "devices", "system", "cpu", "cpu"+strconv.Itoa(cpu), "cache", index)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{"level": strconv.Itoa(level), "shared_cpu_list": shared, "id": strconv.Itoa(id), "type": "Unified"} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, test := range []struct {
		desc  string
		cache func(root string, cpu int)
		want  []int // uncore cache IDs of CPUs 0-7
	}{
		{"two L3 caches of 4 CPUs each", func(root string, cpu int) {
			writeCache(root, cpu, "index2", 2, strconv.Itoa(cpu), cpu) // per core: not an uncore cache
			if cpu < 4 {
				writeCache(root, cpu, "index3", 3, "0-3", 7)
			} else {
				writeCache(root, cpu, "index3", 3, "4-7", 9)
			}
		}, []int{7, 7, 7, 7, 9, 9, 9, 9}},
		{"one L3 cache for the whole node", func(root string, cpu int) {
			writeCache(root, cpu, "index3", 3, "0-7", 5)
		}, []int{0, 0, 0, 0, 0, 0, 0, 0}},
		{"no cache information", func(string, int) {}, []int{0, 0, 0, 0, 0, 0, 0, 0}},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			root := writeSysfs(t, cpus, "0-7", map[int]string{0: "0-7"})
			for cpu := range cpus {
				test.cache(root, cpu)
			}
			topo, err := DiscoverTopology(root)
			if err != nil {
				t.Fatal(err)
			}
			for cpu, want := range test.want {
				if got := topo.CPUDetails[cpu].UncoreCacheID; got != want {
					t.Errorf("cpu %d: uncore cache %d, want %d", cpu, got, want)
				}
			}
			if got, want := topo.CPUDetails.sameUncoreCache(set(0, 1, 2, 3)), true; got != want {
				t.Errorf("CPUs 0-3 share an uncore cache: %v, want %v", got, want)
			}
			if got, want := topo.CPUDetails.sameUncoreCache(set(3, 4)), test.want[3] == test.want[4]; got != want {
				t.Errorf("CPUs 3-4 share an uncore cache: %v, want %v", got, want)
			}
		})
	}
}

func TestDiscoverTopologyErrors(t *testing.T) {
	t.Parallel()
	for _, test := range []struct {
		desc  string
		build func(t *testing.T) string
	}{
		{"no cpu directory", func(t *testing.T) string { return t.TempDir() }},
		{"online CPU without topology", func(t *testing.T) string {
			return writeSysfs(t, []fakeCPU{{0, 0}}, "0-1", map[int]string{0: "0-1"})
		}},
		{"online CPU in no NUMA node", func(t *testing.T) string {
			return writeSysfs(t, []fakeCPU{{0, 0}, {0, 1}}, "0-1", map[int]string{0: "0"})
		}},
		{"no CPUs", func(t *testing.T) string { return writeSysfs(t, nil, "-", nil) }},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			if _, err := DiscoverTopology(test.build(t)); err == nil {
				t.Fatal("DiscoverTopology succeeded")
			}
		})
	}
}

func TestDiscoverTopologyHost(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/sys/devices/system/cpu/cpu0/topology"); err != nil {
		t.Skip("no sysfs CPU topology on this host")
	}
	topo, err := DiscoverTopology("/sys")
	if err != nil {
		t.Fatal(err)
	}
	if topo.NumCPUs < 1 || topo.NumCores < 1 || topo.NumSockets < 1 || topo.NumNUMANodes < 1 {
		t.Fatalf("implausible host topology %v", topo)
	}
}
