package cpumanager

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"
)

// Machines used across the tests. Core IDs are the lowest CPU of each core.
var (
	// twoCPUs: 2 CPUs, 1 socket, no SMT (like the CI machine).
	twoCPUs = CPUDetails{
		0: {NUMANodeID: 0, SocketID: 0, CoreID: 0},
		1: {NUMANodeID: 0, SocketID: 0, CoreID: 1},
	}
	// eightCPUsSMT: 8 CPUs, 1 socket, 4 cores of 2 threads: {0,4} {1,5}
	// {2,6} {3,7}.
	eightCPUsSMT = CPUDetails{
		0: {CoreID: 0}, 1: {CoreID: 1}, 2: {CoreID: 2}, 3: {CoreID: 3},
		4: {CoreID: 0}, 5: {CoreID: 1}, 6: {CoreID: 2}, 7: {CoreID: 3},
	}
	// dualSocketSMT: 12 CPUs, 2 sockets = 2 NUMA nodes, 6 cores of 2
	// threads; even CPUs on socket 0, odd on socket 1; cores {0,6} {2,8}
	// {4,10} on socket 0 and {1,7} {3,9} {5,11} on socket 1 (upstream's
	// topoDualSocketHT); no uncore cache, so the socket stands in.
	dualSocketSMT = func() CPUDetails {
		d := CPUDetails{}
		for cpu := 0; cpu < 12; cpu++ {
			d[cpu] = CPUInfo{NUMANodeID: cpu % 2, SocketID: cpu % 2, CoreID: cpu % 6, UncoreCacheID: cpu % 2}
		}
		return d
	}()
)

func mustTopology(t *testing.T, d CPUDetails) *Topology {
	t.Helper()
	topo, err := NewTopology(d)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// mustMetrics are unregistered metrics for a policy under test.
func mustMetrics(t *testing.T) *metrics {
	t.Helper()
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func set(cpus ...int) cpuset.CPUSet { return cpuset.New(cpus...) }

func mustParse(t *testing.T, s string) cpuset.CPUSet {
	t.Helper()
	c, err := cpuset.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ctr is a container requesting (and limited to) cpu and 1Gi of memory;
// cpu "" means no resources at all.
func ctr(name, cpu string) v1.Container {
	c := v1.Container{Name: name}
	if cpu != "" {
		rl := v1.ResourceList{
			v1.ResourceCPU:    resource.MustParse(cpu),
			v1.ResourceMemory: resource.MustParse("1Gi"),
		}
		c.Resources = v1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
	}
	return c
}

func sidecar(name, cpu string) v1.Container {
	c := ctr(name, cpu)
	always := v1.ContainerRestartPolicyAlways
	c.RestartPolicy = &always
	return c
}

func makePod(uid string, init []v1.Container, containers ...v1.Container) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metaFor(uid),
		Spec:       v1.PodSpec{InitContainers: init, Containers: containers},
	}
}

func metaFor(uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: "pod-" + uid, Namespace: "default", UID: types.UID(uid)}
}
