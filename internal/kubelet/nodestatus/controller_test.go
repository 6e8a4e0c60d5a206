package nodestatus

import (
	"context"
	"errors"
	"net"
	"reflect"
	"runtime"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

func TestNewValidates(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset()
	res := testResources(t, resources.Options{})
	for _, test := range []struct {
		desc string
		opts Options
	}{
		{desc: "no client", opts: Options{NodeName: "n", Resources: res}},
		{desc: "no name", opts: Options{Client: client, Resources: res}},
		{desc: "short lease", opts: Options{Client: client, NodeName: "n", Resources: res, LeaseDuration: time.Millisecond}},
		{desc: "three node IPs", opts: Options{Client: client, NodeName: "n", Resources: res,
			NodeIPs: []net.IP{net.IPv4(10, 0, 0, 1), net.IPv4(10, 0, 0, 2), net.IPv4(10, 0, 0, 3)}}},
		{desc: "no resources", opts: Options{Client: client, NodeName: "n"}},
	} {
		t.Run(test.desc, func(t *testing.T) {
			t.Parallel()
			if _, err := New(test.opts); err == nil {
				t.Error("New succeeded")
			}
		})
	}
	c, err := New(Options{Client: client, NodeName: "n", Resources: res})
	if err != nil {
		t.Fatal(err)
	}
	if c.opts.Hostname != "n" || c.opts.KubeletPort != 10250 ||
		c.opts.LeaseDuration != 40*time.Second || c.opts.StatusUpdateFrequency != 10*time.Second ||
		c.opts.StatusReportFrequency != 5*time.Minute {
		t.Errorf("defaults = %+v", c.opts)
	}
	if _, ok := c.Node(); ok || c.Registered() {
		t.Error("node known before Run")
	}
}

func TestRegisterCreates(t *testing.T) {
	t.Parallel()
	taint := v1.Taint{Key: "example.com/dedicated", Value: "x", Effect: v1.TaintEffectNoSchedule}
	c, client, _, _, _ := testController(t, Options{
		Hostname:    "host-a",
		Labels:      map[string]string{"example.com/role": "test", v1.LabelHostname: "override"},
		Taints:      []v1.Taint{taint},
		KubeletPort: 10255,
	})
	if !c.registerWithAPIServer(context.Background()) {
		t.Fatal("not registered")
	}
	node, err := client.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLabels := map[string]string{
		v1.LabelHostname: "override", v1.LabelOSStable: runtime.GOOS, v1.LabelArchStable: runtime.GOARCH,
		"beta.kubernetes.io/os": runtime.GOOS, "beta.kubernetes.io/arch": runtime.GOARCH, "example.com/role": "test",
	}
	if len(node.Labels) != len(wantLabels) {
		t.Errorf("labels = %v, want %v", node.Labels, wantLabels)
	}
	for k, v := range wantLabels {
		if node.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, node.Labels[k], v)
		}
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0] != taint {
		t.Errorf("taints = %v", node.Spec.Taints)
	}
	if node.Annotations[annotationControllerManagedAttach] != "true" {
		t.Errorf("annotations = %v", node.Annotations)
	}
	info := node.Status.NodeInfo
	if info.ContainerRuntimeVersion != "docker://20.10.24" || info.KubeletVersion != "v1.37.1" ||
		info.KernelVersion != "6.1.0-test" || info.OSImage != "Debian GNU/Linux 12 (bookworm)" ||
		info.OperatingSystem != runtime.GOOS || info.Architecture != runtime.GOARCH {
		t.Errorf("nodeInfo = %+v", info)
	}
	if info.Swap != nil || info.RunningInUserNamespace != nil {
		t.Errorf("nodeInfo swap %v, runningInUserNamespace %v: want neither (no swap; not asked)", info.Swap, info.RunningInUserNamespace)
	}
	if node.Status.DaemonEndpoints.KubeletEndpoint.Port != 10255 {
		t.Errorf("daemonEndpoints = %+v", node.Status.DaemonEndpoints)
	}
	if len(node.Status.Addresses) != 2 || node.Status.Addresses[0].Address != "10.0.0.5" ||
		node.Status.Addresses[1] != (v1.NodeAddress{Type: v1.NodeHostName, Address: "host-a"}) {
		t.Errorf("addresses = %v", node.Status.Addresses)
	}
	if got, ok := c.Node(); !ok || !c.Registered() || got.Name != "node-a" {
		t.Errorf("Node() = %v, %v; Registered() = %v", got, ok, c.Registered())
	}
}

func TestRegisterReconcilesExisting(t *testing.T) {
	t.Parallel()
	adminTaint := v1.Taint{Key: "admin", Effect: v1.TaintEffectNoExecute}
	existing := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-1", Labels: map[string]string{
			v1.LabelOSStable: "windows", "example.com/keep": "yes", v1.LabelTopologyZone: "z1",
		}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{adminTaint}},
		Status: v1.NodeStatus{Capacity: v1.ResourceList{"example.com/dongle": resource.MustParse("2")},
			Allocatable: v1.ResourceList{"example.com/dongle": resource.MustParse("2")}},
	}
	client := fake.NewClientset(existing)
	c, _, _, _, _ := testController(t, Options{Client: client,
		Taints: []v1.Taint{{Key: "ignored", Effect: v1.TaintEffectNoSchedule}}})
	if err := c.tryRegister(context.Background(), c.initialNode(context.Background())); err != nil {
		t.Fatalf("tryRegister: %v", err)
	}
	node, err := client.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[v1.LabelOSStable] != runtime.GOOS || node.Labels[v1.LabelHostname] != "node-a" ||
		node.Labels["example.com/keep"] != "yes" || node.Labels[v1.LabelTopologyZone] != "z1" {
		t.Errorf("labels = %v", node.Labels)
	}
	if len(node.Spec.Taints) != 1 || node.Spec.Taints[0] != adminTaint {
		t.Errorf("taints changed: %v", node.Spec.Taints)
	}
	if node.Annotations[annotationControllerManagedAttach] != "true" {
		t.Errorf("annotations = %v", node.Annotations)
	}
	if q := node.Status.Capacity["example.com/dongle"]; q.Value() != 2 {
		t.Errorf("extended resource = %s, want kept", q.String())
	}
	if got, _ := c.Node(); got.UID != "uid-1" {
		t.Errorf("Node().UID = %q", got.UID)
	}
}

// countPatches counts status patches sent to the fake clientset.
func countPatches(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			n++
		}
	}
	return n
}

func TestUpdateNodeStatusCadence(t *testing.T) {
	t.Parallel()
	ready := &readiness{}
	c, client, _, clk, _ := testController(t, Options{Readiness: ready.get,
		StatusUpdateFrequency: 10 * time.Second, StatusReportFrequency: time.Minute})
	ctx := context.Background()
	if !c.registerWithAPIServer(ctx) {
		t.Fatal("not registered")
	}
	step := func(desc string, d time.Duration, wantPatches int) {
		t.Helper()
		clk.Step(d)
		if err := c.updateNodeStatus(ctx); err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		if got := countPatches(client); got != wantPatches {
			t.Fatalf("%s: %d status patches, want %d", desc, got, wantPatches)
		}
	}
	step("first update always reports", 10*time.Second, 1)
	step("unchanged", 10*time.Second, 1)
	ready.set(errors.New("PLEG is not healthy"))
	step("ready flipped", 10*time.Second, 2)
	node, _ := c.Node()
	if r := condition(node, v1.NodeReady); r.Status != v1.ConditionFalse || r.Message != "PLEG is not healthy" {
		t.Fatalf("Node() ready = %+v", r)
	}
	step("unchanged again", 10*time.Second, 2)
	step("report frequency (with up to 50% random delay) passed", 91*time.Second, 3)
	node, _ = c.Node()
	if hb := condition(node, v1.NodeReady).LastHeartbeatTime; !hb.Time.Equal(clk.Now()) {
		t.Errorf("heartbeat = %v, want %v", hb, clk.Now())
	}
}

func TestUpdateNodeStatusRetries(t *testing.T) {
	t.Parallel()
	failures := 0
	c, client, _, _, _ := testController(t, Options{OnRepeatedHeartbeatFailure: func() { failures++ }})
	ctx := context.Background()
	if !c.registerWithAPIServer(ctx) {
		t.Fatal("not registered")
	}
	patchErrors := 3
	client.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if patchErrors > 0 {
			patchErrors--
			return true, nil, errors.New("apiserver hiccup")
		}
		return false, nil, nil
	})
	if err := c.updateNodeStatus(ctx); err != nil {
		t.Fatalf("updateNodeStatus: %v", err)
	}
	if failures != 2 {
		t.Errorf("OnRepeatedHeartbeatFailure called %d times, want 2 (after tries 2 and 3)", failures)
	}
	patchErrors = 10
	c.opts.Readiness = func() error { return errors.New("runtime down") } // a change to report
	if err := c.updateNodeStatus(ctx); err == nil {
		t.Error("updateNodeStatus succeeded with a failing API server")
	}
}

func TestLeaseOwner(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "uid-9"}})
	c, _, _, _, _ := testController(t, Options{Client: client})
	l := &coordinationv1.Lease{}
	if err := c.setLeaseOwner(context.Background())(l); err != nil {
		t.Fatal(err)
	}
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: "node-a", UID: "uid-9"}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0] != want {
		t.Errorf("ownerReferences = %v", l.OwnerReferences)
	}

	c2, _, _, _, _ := testController(t, Options{NodeName: "missing"})
	if err := c2.setLeaseOwner(context.Background())(&coordinationv1.Lease{}); err == nil {
		t.Error("owner set for a node that does not exist")
	}
}

func TestRunStopsWithContext(t *testing.T) {
	t.Parallel()
	c, _, _, _, _ := testController(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan struct{})
	go func() {
		c.run(ctx)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
}

func TestDoNotRegisterWaitsForTheNode(t *testing.T) {
	t.Parallel()
	c, client, _, _, _ := testController(t, Options{DoNotRegister: true})
	ctx := context.Background()
	if err := c.tryRegister(ctx, c.initialNode(ctx)); err == nil || c.Registered() {
		t.Fatalf("registered without a Node (err %v)", err)
	}
	if _, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{}); err == nil {
		t.Fatal("the kubelet created its Node with DoNotRegister")
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.tryRegister(ctx, c.initialNode(ctx)); err != nil || !c.Registered() {
		t.Fatalf("after an admin created the Node: err %v, registered %v", err, c.Registered())
	}
}

// --cloud-provider=external, providerID and enableControllerAttachDetach
// false, as upstream's initial node and address setter.
func TestRegisterExternalCloudProvider(t *testing.T) {
	t.Parallel()
	uninit := v1.Taint{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: v1.TaintEffectNoSchedule}
	for _, tc := range []struct {
		desc      string
		ips       []net.IP
		wantAddrs []v1.NodeAddress
		wantAnno  string
	}{
		{"node IP given", []net.IP{net.ParseIP("10.0.0.5")},
			[]v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.5"}, {Type: v1.NodeHostName, Address: "host-a"}}, "10.0.0.5"},
		{"no node IP: hostname only", []net.IP{}, []v1.NodeAddress{{Type: v1.NodeHostName, Address: "host-a"}}, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c, client, _, _, _ := testController(t, Options{Hostname: "host-a", NodeIPs: tc.ips, ExternalCloudProvider: true,
				ProviderID: "aws:///eu-west-1a/i-0123", NoControllerAttachDetach: true})
			if !c.registerWithAPIServer(context.Background()) {
				t.Fatal("not registered")
			}
			node, err := client.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(node.Spec.Taints) != 1 || node.Spec.Taints[0] != uninit {
				t.Errorf("taints = %v, want %v", node.Spec.Taints, uninit)
			}
			if node.Spec.ProviderID != "aws:///eu-west-1a/i-0123" {
				t.Errorf("providerID = %q", node.Spec.ProviderID)
			}
			if _, ok := node.Annotations[annotationControllerManagedAttach]; ok {
				t.Errorf("annotations = %v, want no attach/detach annotation", node.Annotations)
			}
			if got := node.Annotations[annotationProvidedNodeIP]; got != tc.wantAnno {
				t.Errorf("provided-node-ip = %q, want %q", got, tc.wantAnno)
			}
			if !reflect.DeepEqual(node.Status.Addresses, tc.wantAddrs) {
				t.Errorf("addresses = %v, want %v", node.Status.Addresses, tc.wantAddrs)
			}
			// Addresses the cloud controller manager sets are kept.
			ccm := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.7"}, {Type: v1.NodeExternalIP, Address: "198.51.100.7"}}
			n := node.DeepCopy()
			n.Status.Addresses = ccm
			c.setAddresses(n)
			if !reflect.DeepEqual(n.Status.Addresses, ccm) {
				t.Errorf("after the CCM: addresses = %v, want %v", n.Status.Addresses, ccm)
			}
		})
	}
}

// The node's spec.podCIDRs go to UpdatePodCIDR before each status update; a
// change is reported with a status patch.
func TestUpdateNodeStatusPodCIDR(t *testing.T) {
	t.Parallel()
	var got []string
	changed := true
	c, client, _, clk, _ := testController(t, Options{StatusUpdateFrequency: 10 * time.Second, StatusReportFrequency: time.Hour,
		UpdatePodCIDR: func(_ context.Context, cidrs string) (bool, error) {
			got = append(got, cidrs)
			return changed, nil
		}})
	ctx := context.Background()
	if !c.registerWithAPIServer(ctx) {
		t.Fatal("not registered")
	}
	if err := c.updateNodeStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("UpdatePodCIDR called without podCIDRs: %v", got)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Spec.PodCIDR, node.Spec.PodCIDRs = "10.244.3.0/24", []string{"10.244.3.0/24", "fd00:3::/64"}
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	patches := countPatches(client)
	clk.Step(10 * time.Second)
	if err := c.updateNodeStatus(ctx); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "10.244.3.0/24,fd00:3::/64" {
		t.Fatalf("UpdatePodCIDR got %v", got)
	}
	if countPatches(client) != patches+1 {
		t.Errorf("a pod CIDR change did not patch the status")
	}
}

// Known.RequestSync makes the status loop update at once, without waiting for its
// period (the node shutdown manager's Ready=False).
func TestRequestSync(t *testing.T) {
	t.Parallel()
	c, client, _, _, _ := testController(t, Options{StatusUpdateFrequency: time.Hour, StatusReportFrequency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !c.registerWithAPIServer(ctx) {
		t.Fatal("not registered")
	}
	done := make(chan struct{})
	go func() { defer close(done); c.runStatusLoop(ctx) }()
	defer func() { cancel(); <-done }()
	// The loop's first update is at once; then nothing for an hour.
	deadline := time.Now().Add(5 * time.Second)
	for countPatches(client) < 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	gets := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "nodes" {
				n++
			}
		}
		return n
	}
	before := gets()
	c.known.RequestSync()
	for gets() == before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if gets() == before {
		t.Fatal("RequestSync did not update the node status")
	}
}

// nodeInfo.swap.capacity is the machine's swap when it has some (NodeSwap),
// and runningInUserNamespace what the kubelet was told (upstream sets it with
// the KubeletInUserNamespace gate).
func TestRegisterSwapAndUserNamespace(t *testing.T) {
	t.Parallel()
	m := testMachine()
	m.SwapCapacity = 2 * gi
	no := false
	c, client, _, _, _ := testController(t, Options{Resources: testResources(t, resources.Options{Machine: m}), RunningInUserNamespace: &no})
	if !c.registerWithAPIServer(context.Background()) {
		t.Fatal("not registered")
	}
	node, err := client.CoreV1().Nodes().Get(context.Background(), "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := node.Status.NodeInfo
	if info.Swap == nil || info.Swap.Capacity == nil || *info.Swap.Capacity != 2*gi {
		t.Errorf("nodeInfo.swap = %v, want capacity %d", info.Swap, 2*gi)
	}
	if info.RunningInUserNamespace == nil || *info.RunningInUserNamespace {
		t.Errorf("nodeInfo.runningInUserNamespace = %v, want false", info.RunningInUserNamespace)
	}
}
