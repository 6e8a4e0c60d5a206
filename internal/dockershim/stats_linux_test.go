package dockershim

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelet-dockershim/kubelet/internal/dockershim/libdocker"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/fstest"
)

const statsTestNetDev = `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0
  eth0:     572       6    1    0    0     0          0         0      980       7    2    0    0     0       0          0
 net1: 10 0 0 0 0 0 0 0 20 0 0 0 0 0 0 0
`

func TestStatsParseNetDev(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc    string
		in      string
		want    []string // "name rx rxerr tx txerr"
		wantErr bool
	}{
		{desc: "three interfaces", in: statsTestNetDev, want: []string{"lo 100 0 100 0", "eth0 572 1 980 2", "net1 10 0 20 0"}},
		{desc: "headers only", in: "Inter-| a\n face |b\n", want: nil},
		{desc: "short line", in: "eth0: 1 2 3\n", wantErr: true},
		{desc: "not a number", in: "eth0: x 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", wantErr: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseNetDev([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			var flat []string
			for _, i := range got {
				flat = append(flat, fmt.Sprintf("%s %d %d %d %d", i.Name, i.RxBytes.Value, i.RxErrors.Value, i.TxBytes.Value, i.TxErrors.Value))
			}
			if fmt.Sprint(flat) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", flat, tc.want)
			}
		})
	}
}

// statsTestProc builds a fake /proc with a mountinfo pointing at a fake cgroup v2 tree
// and one process (pid 42) in /pod/ctr with a network namespace file.
func statsTestProc(t *testing.T) (procRoot, cgRoot string) {
	t.Helper()
	base := t.TempDir()
	procRoot, cgRoot = filepath.Join(base, "proc"), filepath.Join(base, "cgroup")
	fstest.WriteTree(t, filepath.Join(procRoot, "self"), map[string]string{
		"mountinfo": fmt.Sprintf("24 1 0:22 / %s rw - cgroup2 cgroup2 rw\n", cgRoot),
	})
	fstest.WriteTree(t, filepath.Join(procRoot, "42"), map[string]string{"cgroup": "0::/pod/ctr\n"})
	fstest.WriteTree(t, filepath.Join(procRoot, "42", "net"), map[string]string{"dev": statsTestNetDev})
	for dir, usage := range map[string]string{"pod": "9000", "pod/ctr": "4000"} {
		fstest.WriteTree(t, filepath.Join(cgRoot, dir), map[string]string{
			"cpu.stat": "usage_usec " + usage + "\n", "memory.current": "100\n", "memory.stat": "inactive_file 10\n", "pids.current": "2\n",
		})
	}
	return procRoot, cgRoot
}

func TestStatsCgroupReader(t *testing.T) {
	t.Parallel()
	procRoot, cgRoot := statsTestProc(t)
	r := newCgroupReader(procRoot)
	cg, err := r.lookup(42)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cgRoot, "pod/ctr"); cg.Unified != want || !cg.V2 {
		t.Fatalf("lookup = %+v, want unified %s", cg, want)
	}
	now := time.Unix(1, 0)
	own, err := r.read(cg, now)
	if err != nil || own.cpuNanos != 4000000 {
		t.Errorf("own sample = %+v, %v; want cpu 4000000", own, err)
	}
	pod, err := r.read(r.parent(cg), now)
	if err != nil || pod.cpuNanos != 9000000 {
		t.Errorf("pod sample = %+v, %v; want cpu 9000000", pod, err)
	}
	if _, err := r.lookup(43); !errors.Is(err, errCgroupGone) {
		t.Errorf("lookup of a missing pid: err = %v, want errCgroupGone", err)
	}

	n, err := r.network(42, now)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range n.Interfaces {
		names = append(names, i.Name)
	}
	if fmt.Sprint(names) != "[eth0 net1]" || n.DefaultInterface.GetName() != "eth0" || n.Timestamp != now.UnixNano() {
		t.Errorf("network = %v (default %s), want [eth0 net1] with default eth0", names, n.DefaultInterface.GetName())
	}
}

func TestStatsSandboxHostNetwork(t *testing.T) {
	t.Parallel()
	nodeOpts, err := encodeJSONLabel(&runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		desc   string
		labels map[string]string
		want   bool
	}{
		{"host network label", map[string]string{labelHostNetwork: "true"}, true},
		{"namespace options", map[string]string{labelNamespaceOpts: nodeOpts}, true},
		{"pod network", map[string]string{labelHostNetwork: "false"}, false},
		{"no labels", nil, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := sandboxHostNetwork(tc.labels); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestStatsFsUsedBytes(t *testing.T) {
	t.Parallel()
	if used, ok := fsUsedBytes(t.TempDir()); !ok || used == 0 {
		t.Errorf("fsUsedBytes(tempdir) = %d, %v; want a used size", used, ok)
	}
	if _, ok := fsUsedBytes(filepath.Join(t.TempDir(), "missing")); ok {
		t.Error("fsUsedBytes(missing) reported a size")
	}
}

// TestStatsServiceWithFakeProc runs the stats RPCs over a fake Docker and a fake /proc
// and cgroup tree: one pod cgroup /pod holding container cgroup /pod/ctr (pid 42).
func TestStatsServiceWithFakeProc(t *testing.T) {
	t.Parallel()
	procRoot, cgRoot := statsTestProc(t)
	hostNet := map[string]string{labelHostNetwork: "true"}
	f := &statsFakeDocker{containers: map[string]libdocker.ContainerJSON{
		"sb":      statsFakeContainer("sb", typeSandbox, "", 42, 0, "/pod", map[string]string{"tier": "front"}),
		"flat":    statsFakeContainer("flat", typeSandbox, "", 42, 0, "", hostNet),
		"c1":      statsFakeContainer("c1", typeContainer, "sb", 42, 4096, "/pod", map[string]string{"app": "web", annotationPrefix + "note": "x"}),
		"c2":      statsFakeContainer("c2", typeContainer, "sb", 0, 10, "/pod", nil),
		"cflat":   statsFakeContainer("cflat", typeContainer, "flat", 42, 1, "", nil),
		"stopped": statsFakeContainer("stopped", typeSandbox, "", 0, 0, "", nil),
	}}
	s := statsTestService(t, f)
	s.stats.cgroups = newCgroupReader(procRoot)
	now := time.Unix(7000, 0)
	s.stats.now = func() time.Time { return now }
	ctx := context.Background()

	resp, err := s.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	st := resp.Stats
	if st.Attributes.Id != "c1" || st.Attributes.Labels["app"] != "web" || st.Attributes.Annotations["note"] != "x" ||
		st.Attributes.Metadata.GetName() != "c1" {
		t.Errorf("attributes = %v", st.Attributes)
	}
	if st.Cpu.GetUsageCoreNanoSeconds().GetValue() != 4000000 || st.Cpu.UsageNanoCores != nil {
		t.Errorf("first cpu = %v, want 4000000 ns and no rate", st.Cpu)
	}
	if st.Memory.GetWorkingSetBytes().GetValue() != 90 || st.Memory.GetUsageBytes().GetValue() != 100 {
		t.Errorf("memory = %v", st.Memory)
	}
	if st.WritableLayer.GetUsedBytes().GetValue() != 4096 || st.WritableLayer.GetFsId().GetMountpoint() != "/var/lib/docker/overlay2" {
		t.Errorf("writable layer = %v", st.WritableLayer)
	}

	fstest.WriteTree(t, filepath.Join(cgRoot, "pod/ctr"), map[string]string{"cpu.stat": "usage_usec 5000\n"})
	now = now.Add(time.Second)
	resp, err = s.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Stats.Cpu.GetUsageNanoCores().GetValue(); got != 1000000 {
		t.Errorf("nano cores = %d, want 1000000 (1ms of CPU over 1s)", got)
	}

	resp, err = s.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: "c2"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Stats.Cpu != nil || resp.Stats.Memory != nil || resp.Stats.WritableLayer.GetUsedBytes().GetValue() != 10 {
		t.Errorf("stopped container stats = %v, want writable layer only", resp.Stats)
	}
	for _, tc := range []struct {
		desc, id string
		want     error
	}{
		{"unknown", "nope", ErrNotFound},
		{"empty", "", ErrInvalidArgument},
		{"a sandbox is not a container", "sb", ErrNotFound},
	} {
		if _, err := s.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: tc.id}); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.desc, err, tc.want)
		}
	}

	list, err := s.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: "sb"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Stats) != 1 || list.Stats[0].Attributes.Id != "c1" {
		t.Errorf("ListContainerStats(sandbox sb) = %v, want c1 only (c2 is not running)", list.Stats)
	}

	pod, err := s.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: "sb"})
	if err != nil {
		t.Fatal(err)
	}
	lx := pod.Stats.Linux
	if lx.Cpu.GetUsageCoreNanoSeconds().GetValue() != 9000000 || lx.Process.GetProcessCount().GetValue() != 2 ||
		lx.Memory.GetWorkingSetBytes().GetValue() != 90 {
		t.Errorf("pod cgroup figures: cpu %v, process %v, memory %v", lx.Cpu, lx.Process, lx.Memory)
	}
	if lx.Network.GetDefaultInterface().GetName() != "eth0" || len(lx.Containers) != 1 || pod.Stats.Attributes.Labels["tier"] != "front" {
		t.Errorf("pod stats = %v", pod.Stats)
	}

	flat, err := s.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{Id: "fla"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(flat.Stats) != 1 {
		t.Fatalf("ListPodSandboxStats(fla) = %d stats, want 1", len(flat.Stats))
	}
	lx = flat.Stats[0].Linux
	if lx.Cpu.GetUsageCoreNanoSeconds().GetValue() != 10000000 || lx.Process.GetProcessCount().GetValue() != 4 {
		t.Errorf("summed pod figures: cpu %v, process %v; want sandbox+container = 10000000 ns, 4 processes", lx.Cpu, lx.Process)
	}
	if lx.Network != nil {
		t.Errorf("host-network pod reported network %v", lx.Network)
	}
	all, err := s.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Stats) != 2 {
		t.Errorf("ListPodSandboxStats() = %d stats, want 2 (the stopped sandbox is left out)", len(all.Stats))
	}
}
