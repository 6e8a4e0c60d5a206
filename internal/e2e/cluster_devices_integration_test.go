//go:build linux

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/kubelet-dockershim/kubelet/internal/testutil/controlplane"
)

// fakeResource is the extended resource of the test's device plugin.
const fakeResource = "example.com/fake"

// fakeDevicePlugin is a device plugin of the test: its devices are character
// devices made in a temp dir (the numbers of /dev/null), given to containers
// as /dev/fake-<id> with FAKE_DEVICES in their environment.
type fakeDevicePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	dir     string
	updates chan []*pluginapi.Device

	mu        sync.Mutex
	preStarts [][]string
}

func (f *fakeDevicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{PreStartRequired: true}, nil
}

func (f *fakeDevicePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		select {
		case devs := <-f.updates:
			if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (f *fakeDevicePlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, cr := range req.ContainerRequests {
		resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"FAKE_DEVICES": strings.Join(cr.DevicesIds, ",")}}
		for _, id := range cr.DevicesIds {
			resp.Devices = append(resp.Devices, &pluginapi.DeviceSpec{ContainerPath: "/dev/fake-" + id, HostPath: filepath.Join(f.dir, id), Permissions: "rw"})
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func (f *fakeDevicePlugin) PreStartContainer(_ context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.preStarts = append(f.preStarts, req.DevicesIds)
	return &pluginapi.PreStartContainerResponse{}, nil
}

// serveFakeDevicePlugin makes the fake devices ids (the numbers of
// /dev/null) in a directory of the node and serves a fakeDevicePlugin on
// fake.sock in the node's device plugin directory (returned) until the test
// ends; registering it is the caller's.
func serveFakeDevicePlugin(t *testing.T, n *clusterNode, ids ...string) (*fakeDevicePlugin, string) {
	t.Helper()
	devDir := filepath.Join(n.dir, "fake-devices")
	if err := os.Mkdir(devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := unix.Mknod(filepath.Join(devDir, id), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatalf("make the fake device %s: %v", id, err)
		}
	}
	plugin := &fakeDevicePlugin{dir: devDir, updates: make(chan []*pluginapi.Device, 4)}
	pluginDir := filepath.Join(n.rootDir, "device-plugins")
	l, err := net.Listen("unix", filepath.Join(pluginDir, "fake.sock"))
	if err != nil {
		t.Fatalf("the plugin's socket: %v", err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, plugin)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return plugin, pluginDir
}

// testDevicePlugins (issue 16 item 4): a device plugin of the test registers
// two devices with the node's device manager; the node advertises them; a
// pod asking for one is scheduled, admitted, gets the device node, the
// plugin's environment and a PreStartContainer call, and is recorded in the
// checkpoint and the PodResources API; a device turning unhealthy lowers the
// allocatable; a pod bound to the node asking for more than is free is
// rejected with upstream's UnexpectedAdmissionError.
func testDevicePlugins(t *testing.T, c *controlplane.Cluster) {
	n := newClusterNode(t, c)
	n.createNamespace()
	n.start()
	n.waitNodeReady(90 * time.Second)
	ctx := context.Background()

	plugin, pluginDir := serveFakeDevicePlugin(t, n, "dev-0", "dev-1")
	healthy := func(ids ...string) []*pluginapi.Device {
		var out []*pluginapi.Device
		for _, id := range []string{"dev-0", "dev-1"} {
			h := pluginapi.Unhealthy
			if slices.Contains(ids, id) {
				h = pluginapi.Healthy
			}
			out = append(out, &pluginapi.Device{ID: id, Health: h})
		}
		return out
	}
	plugin.updates <- healthy("dev-0", "dev-1")

	conn, err := grpc.NewClient("unix://"+filepath.Join(pluginDir, "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reg := pluginapi.NewRegistrationClient(conn)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := reg.Register(rctx, &pluginapi.RegisterRequest{Version: "v1alpha9", Endpoint: "fake.sock", ResourceName: fakeResource}); err == nil ||
		!strings.Contains(err.Error(), `requested API version "v1alpha9" is not supported by kubelet`) {
		t.Errorf("registration with a bad version: %v", err)
	}
	if _, err := reg.Register(rctx, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "../fake.sock", ResourceName: fakeResource}); err == nil {
		t.Error("an endpoint outside the plugin directory was accepted")
	}
	if _, err := reg.Register(rctx, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "fake.sock", ResourceName: fakeResource,
		Options: &pluginapi.DevicePluginOptions{PreStartRequired: true}}); err != nil {
		t.Fatalf("register the device plugin: %v", err)
	}

	waitDevices := func(capacity, allocatable int64) {
		t.Helper()
		n.poll(60*time.Second, fmt.Sprintf("node %s: capacity %d, allocatable %d", fakeResource, capacity, allocatable), func() (bool, string) {
			node, err := n.apiNode()
			if err != nil {
				return false, err.Error()
			}
			c, a := node.Status.Capacity[fakeResource], node.Status.Allocatable[fakeResource]
			return c.Value() == capacity && a.Value() == allocatable, fmt.Sprintf("capacity %s allocatable %s", c.String(), a.String())
		})
	}
	waitDevices(2, 2)

	n.applyYAML(`apiVersion: v1
kind: Pod
metadata: {name: gpu, namespace: @NS@}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sh, -c, "echo FAKE=$FAKE_DEVICES; ls -l /dev/fake-dev-0; echo written > /dev/fake-dev-0 && echo wrote; sleep 3600"]
    resources: {limits: {example.com/fake: 1}}
`)
	pod := n.waitAPIPod("gpu", 90*time.Second, "running", runningAndReady)
	log := n.waitLog(pod, "main", "wrote", 30*time.Second)
	if !strings.Contains(log, "FAKE=dev-0\n") || !strings.Contains(log, "crw") {
		t.Errorf("the container's log lacks its device and environment:\n%s", log)
	}
	plugin.mu.Lock()
	if len(plugin.preStarts) != 1 || !slices.Equal(plugin.preStarts[0], []string{"dev-0"}) {
		t.Errorf("PreStartContainer calls %v, want one with dev-0", plugin.preStarts)
	}
	plugin.mu.Unlock()
	if b, err := os.ReadFile(filepath.Join(pluginDir, "kubelet_internal_checkpoint")); err != nil ||
		!strings.Contains(string(b), string(pod.UID)) || !strings.Contains(string(b), `"RegisteredDevices":{"example.com/fake":["dev-0","dev-1"]}`) {
		t.Errorf("checkpoint: %s %v", b, err)
	}

	pr := n.podResources()
	list, err := pr.List(rctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		t.Fatalf("PodResources List: %v", err)
	}
	found := false
	for _, p := range list.PodResources {
		if p.Name == "gpu" && p.Namespace == n.ns && len(p.Containers) == 1 && len(p.Containers[0].Devices) == 1 &&
			p.Containers[0].Devices[0].ResourceName == fakeResource && slices.Equal(p.Containers[0].Devices[0].DeviceIds, []string{"dev-0"}) {
			found = true
		}
	}
	if !found {
		t.Errorf("PodResources List lacks gpu with dev-0: %v", list)
	}
	if got, err := pr.Get(rctx, &podresourcesapi.GetPodResourcesRequest{PodName: "gpu", PodNamespace: n.ns}); err != nil || got.PodResources.GetName() != "gpu" {
		t.Errorf("PodResources Get: %v %v", got, err)
	}
	alloc, err := pr.GetAllocatableResources(rctx, &podresourcesapi.AllocatableResourcesRequest{})
	if err != nil || len(alloc.Devices) != 1 || !slices.Equal(alloc.Devices[0].DeviceIds, []string{"dev-0", "dev-1"}) {
		t.Errorf("PodResources GetAllocatableResources: %v %v", alloc, err)
	}

	body, code, err := n.get("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	checkUpstreamMetrics(t, body, false)
	for _, want := range []string{`kubelet_device_plugin_registration_total{resource_name="example.com/fake"} 3`,
		`kubelet_device_plugin_alloc_duration_seconds_count{resource_name="example.com/fake"} 1`,
		`kubelet_pod_resources_endpoint_requests_list{server_api_version="v1"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	plugin.updates <- healthy("dev-0")
	waitDevices(2, 1)

	n.applyYAML(fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: greedy, namespace: @NS@}
spec:
  nodeName: %s
  containers:
  - name: main
    image: @IMAGE@
    imagePullPolicy: Never
    command: [sleep, "3600"]
    resources: {limits: {example.com/fake: 2}}
`, n.name))
	greedy := n.waitAPIPod("greedy", 60*time.Second, "rejected", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	want := "Allocate failed due to requested number of devices unavailable for example.com/fake. Requested: 2, Available: 0, which is unexpected"
	if greedy.Status.Reason != "UnexpectedAdmissionError" || !strings.Contains(greedy.Status.Message, want) {
		t.Errorf("greedy pod: reason %q message %q, want UnexpectedAdmissionError and %q", greedy.Status.Reason, greedy.Status.Message, want)
	}
}

// podResources is a client of the node's PodResources API, closed at the
// end of the test.
func (n *clusterNode) podResources() podresourcesapi.PodResourcesListerClient {
	n.t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(n.rootDir, "pod-resources", "kubelet.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { _ = conn.Close() })
	return podresourcesapi.NewPodResourcesListerClient(conn)
}
