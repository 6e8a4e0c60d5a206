//go:build linux

package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/waitfor"
)

// nodeClientFor is a client with node name's credentials talking to host (a
// proxy of the API server).
func nodeClientFor(t *testing.T, c *controlplane.Cluster, name, host string) kubernetes.Interface {
	t.Helper()
	cfg := c.NodeRESTConfig(t, name)
	cfg.Host = host
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// eventRecorder records to the API server with the node's client, as the
// kubelet's broadcaster does; it stops with the test.
func eventRecorder(t *testing.T, client kubernetes.Interface, node string) record.EventRecorder {
	t.Helper()
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	t.Cleanup(b.Shutdown)
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: node})
}

// startController runs a controller for node name until the test ends.
func startController(t *testing.T, c *controlplane.Cluster, opts Options) *Controller {
	t.Helper()
	return startControllerWith(t, c, c.NodeClient(t, opts.NodeName), opts)
}

// startControllerWith is startController with the given node client.
func startControllerWith(t *testing.T, c *controlplane.Cluster, client kubernetes.Interface, opts Options) *Controller {
	t.Helper()
	opts.Client = client
	opts.Recorder = eventRecorder(t, client, opts.NodeName)
	opts.Logger = zaptest.NewLogger(t)
	if opts.NodeIPs == nil {
		opts.NodeIPs = []net.IP{net.IPv4(127, 0, 0, 1)}
	}
	if opts.Runtime == nil {
		opts.Runtime = fakeRuntime{name: "docker", version: "20.10.24"}
	}
	if opts.KubeletVersion == "" {
		opts.KubeletVersion = "v1.37.1"
	}
	if opts.Resources == nil {
		opts.Resources = machineResources(t, t.TempDir(), resources.Options{})
	}
	if opts.StatusUpdateFrequency == 0 {
		opts.StatusUpdateFrequency = time.Second
	}
	if opts.LeaseDuration == 0 {
		opts.LeaseDuration = 4 * time.Second
	}
	ctl, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := ctl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		ctl.Wait()
		c.DeleteNode(t, opts.NodeName)
	})
	return ctl
}

// waitNode polls the node (admin view) until cond holds or the timeout passes.
func waitNode(t *testing.T, c *controlplane.Cluster, name string, timeout time.Duration, what string,
	cond func(*v1.Node) bool) *v1.Node {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *v1.Node
	for time.Now().Before(deadline) {
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			last = n
			if cond(n) {
				return n
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("node %s: timed out waiting for %s; last: %+v\napiserver log:\n%s", name, what,
		last, c.LogTail("kube-apiserver", 20))
	return nil
}

func readyIs(status v1.ConditionStatus) func(*v1.Node) bool {
	return func(n *v1.Node) bool {
		r := findCondition(n.Status.Conditions, v1.NodeReady)
		return r != nil && r.Status == status
	}
}

func TestIntegrationRegisterStatusLease(t *testing.T) {
	t.Parallel()
	c := shared.Get(t)
	name := "it-register"
	taint := v1.Taint{Key: "example.com/dedicated", Value: "it", Effect: v1.TaintEffectNoSchedule}
	rootDir := t.TempDir()
	ctl := startController(t, c, Options{
		NodeName: name,
		Hostname: "it-register-host",
		Labels:   map[string]string{"example.com/role": "it", "node.kubernetes.io/pool": "a"},
		Taints:   []v1.Taint{taint},
		Resources: machineResources(t, rootDir, resources.Options{
			MaxPods:        42,
			SystemReserved: v1.ResourceList{"cpu": resource.MustParse("100m"), "memory": resource.MustParse("100Mi")},
			KubeReserved:   v1.ResourceList{"memory": resource.MustParse("50Mi")},
			EvictionHard:   map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		}),
		StatusReportFrequency: 3 * time.Second,
	})
	node := waitNode(t, c, name, 30*time.Second, "Ready=True", readyIs(v1.ConditionTrue))

	checkMetadata(t, node, taint)
	checkAddressesAndInfo(t, node)
	checkResources(t, node, rootDir)
	checkPressureConditions(t, node)

	// The Node the API server shows comes from the create the controller
	// makes; it records the registration once the create has answered.
	waitfor.Condition(t, ctl.Registered)
	got, ok := ctl.Node()
	if !ok || !ctl.Registered() || got.UID != node.UID || got.Labels["example.com/role"] != "it" {
		t.Errorf("Node() = %v, %v; Registered() = %v", got, ok, ctl.Registered())
	} else if a := got.Status.Allocatable[v1.ResourcePods]; a.Value() != 42 {
		t.Errorf("Node() allocatable pods = %s", a.String())
	}

	checkLease(t, c, name, node.UID)
	checkHeartbeat(t, c, node)
	checkEventsExist(t, c, name, "Starting", "NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeHasSufficientPID")
}

func checkMetadata(t *testing.T, node *v1.Node, taint v1.Taint) {
	t.Helper()
	want := map[string]string{
		v1.LabelHostname: "it-register-host", v1.LabelOSStable: runtime.GOOS, v1.LabelArchStable: runtime.GOARCH,
		"beta.kubernetes.io/os": runtime.GOOS, "beta.kubernetes.io/arch": runtime.GOARCH,
		"example.com/role": "it", "node.kubernetes.io/pool": "a",
	}
	for k, v := range want {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (labels %v)", k, node.Labels[k], v, node.Labels)
		}
	}
	found := false
	for _, tt := range node.Spec.Taints {
		found = found || (tt.Key == taint.Key && tt.Value == taint.Value && tt.Effect == taint.Effect)
	}
	if !found {
		t.Errorf("taints = %v, want %v among them", node.Spec.Taints, taint)
	}
	if node.Annotations[annotationControllerManagedAttach] != "true" {
		t.Errorf("annotations = %v", node.Annotations)
	}
}

func checkAddressesAndInfo(t *testing.T, node *v1.Node) {
	t.Helper()
	wantAddrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "127.0.0.1"}, {Type: v1.NodeHostName, Address: "it-register-host"}}
	if fmt.Sprint(node.Status.Addresses) != fmt.Sprint(wantAddrs) {
		t.Errorf("addresses = %v, want %v", node.Status.Addresses, wantAddrs)
	}
	m, err := resources.ReadMachine("/")
	if err != nil {
		t.Fatalf("read machine: %v", err)
	}
	info := node.Status.NodeInfo
	for _, f := range []struct{ field, got, want string }{
		{"kernelVersion", info.KernelVersion, m.KernelVersion},
		{"osImage", info.OSImage, m.OSImage},
		{"machineID", info.MachineID, m.MachineID},
		{"systemUUID", info.SystemUUID, m.SystemUUID},
		{"bootID", info.BootID, m.BootID},
		{"operatingSystem", info.OperatingSystem, runtime.GOOS},
		{"architecture", info.Architecture, runtime.GOARCH},
		{"containerRuntimeVersion", info.ContainerRuntimeVersion, "docker://20.10.24"},
		{"kubeletVersion", info.KubeletVersion, "v1.37.1"},
	} {
		if f.got != f.want {
			t.Errorf("nodeInfo.%s = %q, want %q", f.field, f.got, f.want)
		}
	}
	if info.BootID == "" || info.KernelVersion == "" {
		t.Errorf("nodeInfo has empty bootID/kernelVersion: %+v", info)
	}
	if p := node.Status.DaemonEndpoints.KubeletEndpoint.Port; p != 10250 {
		t.Errorf("kubelet endpoint port = %d", p)
	}
}

// checkResources compares capacity with the machine and allocatable with
// capacity minus the reservations of the test's options.
func checkResources(t *testing.T, node *v1.Node, rootDir string) {
	t.Helper()
	m, err := resources.ReadMachine(rootDir)
	if err != nil {
		t.Fatalf("read machine: %v", err)
	}
	capacity, alloc := node.Status.Capacity, node.Status.Allocatable
	fsEviction := int64(float64(m.RootFsCapacity) * float64(float32(10)/100))
	var hugeTotal int64
	for _, v := range m.HugePages {
		hugeTotal += v
	}
	for _, r := range []struct {
		name               v1.ResourceName
		wantCap, wantAlloc int64 // milli for cpu
	}{
		{v1.ResourceCPU, int64(m.NumCPU) * 1000, int64(m.NumCPU)*1000 - 100},
		{v1.ResourceMemory, m.MemoryCapacity, m.MemoryCapacity - 250*mi - hugeTotal},
		{v1.ResourcePods, 42, 42},
		{v1.ResourceEphemeralStorage, m.RootFsCapacity, m.RootFsCapacity - fsEviction},
	} {
		c, a := capacity[r.name], alloc[r.name]
		gotCap, gotAlloc := c.Value(), a.Value()
		if r.name == v1.ResourceCPU {
			gotCap, gotAlloc = c.MilliValue(), a.MilliValue()
		}
		if gotCap != r.wantCap || gotAlloc != r.wantAlloc {
			t.Errorf("%s: capacity %d allocatable %d, want %d and %d", r.name, gotCap, gotAlloc, r.wantCap, r.wantAlloc)
		}
	}
}

func checkPressureConditions(t *testing.T, node *v1.Node) {
	t.Helper()
	for _, want := range []struct {
		t      v1.NodeConditionType
		status v1.ConditionStatus
		reason string
	}{
		{v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory"},
		{v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure"},
		{v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID"},
		{v1.NodeReady, v1.ConditionTrue, "KubeletReady"},
	} {
		got := condition(node, want.t)
		if got.Status != want.status || got.Reason != want.reason {
			t.Errorf("%s = %s/%s (%s), want %s/%s", want.t, got.Status, got.Reason, got.Message, want.status, want.reason)
		}
	}
}

// checkLease waits for the node's Lease, checks it and sees its renewTime advance.
func checkLease(t *testing.T, c *controlplane.Cluster, name string, uid types.UID) {
	t.Helper()
	leases := c.Client.CoordinationV1().Leases(v1.NamespaceNodeLease)
	var first *metav1.MicroTime
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		l, err := leases.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if first == nil {
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != name ||
				l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 4 {
				t.Errorf("lease spec = %+v", l.Spec)
			}
			if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" ||
				l.OwnerReferences[0].Name != name || l.OwnerReferences[0].UID != uid {
				t.Errorf("lease ownerReferences = %+v", l.OwnerReferences)
			}
			first = l.Spec.RenewTime
			if first == nil {
				t.Fatalf("lease has no renewTime")
			}
			continue
		}
		if l.Spec.RenewTime != nil && l.Spec.RenewTime.After(first.Time) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("lease %s/%s: not renewed within 20s (first renewTime %v)", v1.NamespaceNodeLease, name, first)
}

// checkHeartbeat sees Ready's heartbeat move (StatusReportFrequency 3s) while
// its transition time stays.
func checkHeartbeat(t *testing.T, c *controlplane.Cluster, node *v1.Node) {
	t.Helper()
	before := condition(node, v1.NodeReady)
	after := waitNode(t, c, node.Name, 20*time.Second, "a newer Ready heartbeat", func(n *v1.Node) bool {
		r := condition(n, v1.NodeReady)
		return r.LastHeartbeatTime.After(before.LastHeartbeatTime.Time)
	})
	if r := condition(after, v1.NodeReady); !r.LastTransitionTime.Equal(&before.LastTransitionTime) || r.Status != v1.ConditionTrue {
		t.Errorf("Ready moved: before %+v, after %+v", before, r)
	}
}

// checkEventsExist waits until the node has events with all the given reasons.
func checkEventsExist(t *testing.T, c *controlplane.Cluster, name string, reasons ...string) {
	t.Helper()
	sel := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": name}.AsSelector().String()
	deadline := time.Now().Add(20 * time.Second)
	var missing []string
	for time.Now().Before(deadline) {
		list, err := c.Client.CoreV1().Events(metav1.NamespaceDefault).List(context.Background(),
			metav1.ListOptions{FieldSelector: sel})
		if err == nil {
			have := map[string]bool{}
			for _, e := range list.Items {
				have[e.Reason] = true
			}
			missing = missing[:0]
			for _, r := range reasons {
				if !have[r] {
					missing = append(missing, r)
				}
			}
			if len(missing) == 0 {
				return
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Errorf("node %s: events %v not recorded within 20s", name, missing)
}

func TestIntegrationReadiness(t *testing.T) {
	t.Parallel()
	c := shared.Get(t)
	name := "it-readiness"
	ready := &readiness{err: errors.New("container runtime is down")}
	startController(t, c, Options{NodeName: name, Readiness: ready.get})

	// Registered not ready, with the readiness error as message.
	node := waitNode(t, c, name, 30*time.Second, "Ready=False", readyIs(v1.ConditionFalse))
	r := condition(node, v1.NodeReady)
	if r.Reason != "KubeletNotReady" || r.Message != "container runtime is down" {
		t.Errorf("ready = %+v", r)
	}

	// Runtime up: Ready soon (fast status updates), transition time moves (API
	// times have second precision: let one pass).
	time.Sleep(time.Until(r.LastTransitionTime.Add(1100 * time.Millisecond)))
	start := time.Now()
	ready.set(nil)
	node = waitNode(t, c, name, 10*time.Second, "Ready=True", readyIs(v1.ConditionTrue))
	t.Logf("Ready=True %s after readiness turned nil", time.Since(start).Round(time.Millisecond))
	up := condition(node, v1.NodeReady)
	if up.Reason != "KubeletReady" || !up.LastTransitionTime.After(r.LastTransitionTime.Time) {
		t.Errorf("ready after recovery = %+v (before %+v)", up, r)
	}

	// Runtime down again: Ready=False within a status update or two.
	ready.set(errors.New("PLEG is not healthy: pleg was last seen active 3m0s ago"))
	node = waitNode(t, c, name, 10*time.Second, "Ready=False again", readyIs(v1.ConditionFalse))
	if r := condition(node, v1.NodeReady); r.Reason != "KubeletNotReady" || !strings.HasPrefix(r.Message, "PLEG is not healthy") {
		t.Errorf("ready = %+v", r)
	}

	// And back.
	ready.set(nil)
	waitNode(t, c, name, 10*time.Second, "Ready=True again", readyIs(v1.ConditionTrue))
	checkEventsExist(t, c, name, "NodeReady", "NodeNotReady")
}

func TestIntegrationExistingNode(t *testing.T) {
	t.Parallel()
	c := shared.Get(t)
	name := "it-existing"
	adminTaint := v1.Taint{Key: "example.com/admin", Effect: v1.TaintEffectNoSchedule}
	_, err := c.Client.CoreV1().Nodes().Create(context.Background(), &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			v1.LabelOSStable: "plan9", "example.com/keep": "yes",
		}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{adminTaint}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("pre-create node: %v", err)
	}
	ctl := startController(t, c, Options{NodeName: name,
		Taints: []v1.Taint{{Key: "example.com/ignored", Effect: v1.TaintEffectNoSchedule}}})
	node := waitNode(t, c, name, 30*time.Second, "Ready=True", readyIs(v1.ConditionTrue))
	if node.Labels[v1.LabelOSStable] != runtime.GOOS || node.Labels[v1.LabelHostname] != name ||
		node.Labels["beta.kubernetes.io/arch"] != runtime.GOARCH || node.Labels["example.com/keep"] != "yes" {
		t.Errorf("labels = %v", node.Labels)
	}
	var taints []string // the node lifecycle controller's node.kubernetes.io/* taints aside
	for _, tt := range node.Spec.Taints {
		if !strings.HasPrefix(tt.Key, "node.kubernetes.io/") {
			taints = append(taints, tt.Key)
		}
	}
	if len(taints) != 1 || taints[0] != adminTaint.Key {
		t.Errorf("taints = %v, want only the admin's", node.Spec.Taints)
	}
	if node.Annotations[annotationControllerManagedAttach] != "true" {
		t.Errorf("annotations = %v", node.Annotations)
	}
	if !ctl.Registered() {
		t.Error("not Registered()")
	}
}

// machineResources is this machine's resources (read as the kubelet reads
// them for rootDir) with opts' reservations.
func machineResources(t *testing.T, rootDir string, opts resources.Options) *resources.Node {
	t.Helper()
	m, err := resources.ReadMachine(rootDir)
	if err != nil {
		t.Fatalf("read machine: %v", err)
	}
	opts.Machine = m
	n, err := resources.New(opts)
	if err != nil {
		t.Fatalf("resources.New: %v", err)
	}
	return n
}
