//go:build linux

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// writeNUMASysfs writes a fake sysfs tree of this machine's CPUs 0 and 1 on
// two sockets and two NUMA nodes (node0: CPU 0, node1: CPU 1), with the
// nodes' distances: the topology of a 2-NUMA machine for a kubelet given
// it through KUBELET_DOCKERSHIM_TEST_SYSFS (its cpusets are real CPUs).
// extra adds files (a path under the tree: content).
func writeNUMASysfs(t *testing.T, dir string, extra ...map[string]string) string {
	t.Helper()
	root := filepath.Join(dir, "sysfs")
	files := map[string]string{
		"devices/system/cpu/online":                            "0-1",
		"devices/system/cpu/cpu0/topology/physical_package_id": "0",
		"devices/system/cpu/cpu0/topology/core_id":             "0",
		"devices/system/cpu/cpu1/topology/physical_package_id": "1",
		"devices/system/cpu/cpu1/topology/core_id":             "0",
		"devices/system/node/node0/cpulist":                    "0",
		"devices/system/node/node1/cpulist":                    "1",
		"devices/system/node/node0/distance":                   "10 21",
		"devices/system/node/node1/distance":                   "21 10",
	}
	for _, more := range extra {
		for rel, content := range more {
			files[rel] = content
		}
	}
	for rel, content := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// testTopologyManager (issue 30 item 4): the topology manager with the CPU
// and device managers as hint providers, on this machine's two CPUs seen as
// two NUMA nodes (a fake sysfs tree): static CPU manager with CPU 0
// reserved (CPU 1, on node 1, is the one exclusive CPU), a device plugin of
// the test with dev-0 on node 0 and dev-1 on node 1, policy
// single-numa-node.
//   - A Guaranteed pod of 1 CPU and 1 device is admitted with both on node
//     1: its container gets cpuset 1 and dev-1 (the device manager alone,
//     by ID, would give dev-0).
//   - A second such pod finds no node with a free CPU: it is rejected with
//     TopologyAffinityError and upstream's message.
//   - The topology manager's metrics count both admissions, one error and
//     one NUMA-aligned container.
func testTopologyManager(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.env = append(n.env, "KUBELET_DOCKERSHIM_TEST_SYSFS="+writeNUMASysfs(t, n.dir, numaMeminfo))
	n.extra = append(n.extra, "--cpu-manager-policy=static", "--reserved-cpus=0", "--topology-manager-policy=single-numa-node")
	n.start()
	n.waitNodeReady(90 * time.Second)

	plugin, pluginDir := serveFakeDevicePlugin(t, n, "dev-0", "dev-1")
	onNode := func(id string, node int64) *pluginapi.Device {
		return &pluginapi.Device{ID: id, Health: pluginapi.Healthy, Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: node}}}}
	}
	plugin.updates <- []*pluginapi.Device{onNode("dev-0", 0), onNode("dev-1", 1)}
	conn, err := grpc.NewClient("unix://"+filepath.Join(pluginDir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "fake.sock",
		ResourceName: fakeResource, Options: &pluginapi.DevicePluginOptions{PreStartRequired: true}}); err != nil {
		t.Fatalf("register the device plugin: %v", err)
	}
	n.poll(60*time.Second, "2 devices allocatable", func() (bool, string) {
		node, err := n.apiNode()
		if err != nil {
			return false, err.Error()
		}
		a := node.Status.Allocatable[fakeResource]
		return a.Value() == 2, a.String()
	})

	pod := func(name string) string {
		return n.boundPodYAML(name, 1, `[sh, -c, "echo FAKE=$FAKE_DEVICES; cat /sys/fs/cgroup/cpuset/cpuset.cpus 2>/dev/null || cat /sys/fs/cgroup/cpuset.cpus.effective; sleep 3600"]`,
			"resources: {limits: {cpu: 1, memory: 64Mi, example.com/fake: 1}}")
	}
	n.applyYAML(pod("aligned"))
	p := n.waitAPIPod("aligned", podStartTimeout, "running", runningAndReady)
	log := n.waitLog(p, "main", "FAKE=", 30*time.Second)
	if !strings.Contains(log, "FAKE=dev-1\n1\n") {
		t.Errorf("the aligned pod did not get dev-1 and CPU 1 (both on NUMA node 1):\n%s", log)
	}

	pr := n.podResources()
	if got, err := pr.Get(ctx, &podresourcesapi.GetPodResourcesRequest{PodName: "aligned", PodNamespace: n.ns}); err != nil ||
		len(got.PodResources.GetContainers()) != 1 || !slices.Equal(got.PodResources.Containers[0].CpuIds, []int64{1}) {
		t.Errorf("PodResources of the aligned pod (exclusive CPU 1): %v %v", got, err)
	}
	if alloc, err := pr.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{}); err != nil || !slices.Equal(alloc.CpuIds, []int64{1}) {
		t.Errorf("PodResources allocatable CPUs (all but the reserved CPU 0): %v %v", alloc, err)
	}

	n.applyYAML(pod("refused"))
	r := n.waitAPIPod("refused", 60*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if r.Status.Reason != "TopologyAffinityError" || r.Status.Message != "Pod was rejected: Resources cannot be allocated with Topology locality" {
		t.Errorf("rejected pod status: %q %q", r.Status.Reason, r.Status.Message)
	}

	body, code, err := n.get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	for _, want := range []string{
		"kubelet_topology_manager_admission_requests_total 2",
		"kubelet_topology_manager_admission_errors_total 1",
		`kubelet_container_aligned_compute_resources_count{boundary="numa_node",scope="container"} 1`,
		`kubelet_container_aligned_compute_resources_failure_count{boundary="numa_node",scope="container"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}

}
