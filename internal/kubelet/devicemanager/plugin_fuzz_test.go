package devicemanager

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/devicemanager/checkpoint"
)

// newFuzzManager is a manager on dir that is not started: Register checks a
// request and then refuses it.
func newFuzzManager(tb testing.TB, dir string) (*Manager, *testResources) {
	tb.Helper()
	res := &testResources{}
	m, err := New(Options{Dir: dir, Resources: res, ActivePods: func() []*v1.Pod { return nil }})
	if err != nil {
		tb.Fatal(err)
	}
	return m, res
}

// addMarshaled adds each message, protobuf-encoded, to the seed corpus.
func addMarshaled(f *testing.F, msgs ...proto.Message) {
	for _, msg := range msgs {
		b, err := proto.Marshal(msg)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzRegisterRequest: any Register request off the wire is checked without
// a panic, and what checkRegistration accepts names a socket directly in the
// device plugin directory (not the registration socket or the checkpoint)
// and an extended resource that a Node's capacity can carry.
func FuzzRegisterRequest(f *testing.F) {
	addMarshaled(f,
		&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "gpu.sock", ResourceName: "example.com/gpu"},
		&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "nvidia-gpu.sock", ResourceName: "nvidia.com/gpu",
			Options: &pluginapi.DevicePluginOptions{PreStartRequired: true, GetPreferredAllocationAvailable: true}},
		&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "../kubelet.sock", ResourceName: "example.com/gpu"},
		&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: SocketName, ResourceName: "example.com/gpu"},
		&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: checkpoint.FileName, ResourceName: "example.com/gpu"},
		&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "x.sock", ResourceName: "a.kubernetes.io/gpu"},
		&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "x.sock", ResourceName: "requests.example.com/gpu"},
		&pluginapi.RegisterRequest{Version: "v1alpha", Endpoint: "/var/lib/kubelet/device-plugins/x.sock", ResourceName: "cpu"},
	)
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x02, 0xc3, 0x28}) // version: invalid UTF-8
	dir := filepath.Join(f.TempDir(), "device-plugins")
	m, _ := newFuzzManager(f, dir)
	f.Fuzz(func(t *testing.T, data []byte) {
		req := &pluginapi.RegisterRequest{}
		if proto.Unmarshal(data, req) != nil {
			return // gRPC refuses the call
		}
		_, served := registration{m: m}.Register(context.Background(), req)
		err := checkRegistration(req, m.dir)
		if served == nil {
			t.Fatalf("Register(%v) succeeded on a manager that is not running", req)
		}
		if err != nil {
			if served.Error() != err.Error() {
				t.Fatalf("Register(%v) = %v, want the check's %v", req, served, err)
			}
			return
		}
		ep := req.Endpoint
		if sock := filepath.Join(m.dir, ep); filepath.Dir(sock) != m.dir || filepath.Base(sock) != ep || ep == SocketName || ep == checkpoint.FileName {
			t.Fatalf("endpoint %q accepted: socket %s", ep, sock)
		}
		name := req.ResourceName
		if errs := validation.IsQualifiedName(name); len(errs) > 0 || !strings.Contains(name, "/") || strings.Contains(name, v1.ResourceDefaultNamespacePrefix) {
			t.Fatalf("resource name %q accepted: %v", name, errs)
		}
	})
}

// FuzzListAndWatchResponse: any device list a plugin streams becomes the
// resource's devices without a panic: no device without an ID, capacity the
// number of distinct IDs, allocatable the healthy ones among them.
func FuzzListAndWatchResponse(f *testing.F) {
	addMarshaled(f,
		&pluginapi.ListAndWatchResponse{Devices: devices("a", "b", "c")},
		&pluginapi.ListAndWatchResponse{Devices: []*pluginapi.Device{{ID: "gpu-0", Health: pluginapi.Healthy,
			Topology: &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: 0}, {ID: 1}}}}}},
		&pluginapi.ListAndWatchResponse{Devices: []*pluginapi.Device{{ID: "", Health: pluginapi.Healthy}, {ID: "x", Health: "healthy"},
			{ID: "x", Health: pluginapi.Healthy}, {ID: "y", Health: pluginapi.Unhealthy}}},
		&pluginapi.ListAndWatchResponse{},
	)
	f.Add([]byte{0x0a, 0x00, 0x0a, 0x00}) // two empty devices
	dir := filepath.Join(f.TempDir(), "device-plugins")
	const res = "example.com/dev"
	f.Fuzz(func(t *testing.T, data []byte) {
		resp := &pluginapi.ListAndWatchResponse{}
		if proto.Unmarshal(data, resp) != nil {
			return
		}
		devs := deviceMap(resp)
		ids, healthy := map[string]bool{}, map[string]bool{}
		for _, d := range resp.Devices {
			if d.ID != "" {
				ids[d.ID] = true
				healthy[d.ID] = d.Health == pluginapi.Healthy // the last one wins
			}
		}
		for id, d := range devs {
			if id == "" || d.ID != id {
				t.Fatalf("device %+v kept under %q", d, id)
			}
		}
		if len(devs) != len(ids) {
			t.Fatalf("%d devices kept of %d IDs", len(devs), len(ids))
		}
		m, _ := newFuzzManager(t, dir)
		p := &plugin{resource: res, devices: devs}
		m.plugins[res], m.known[res] = p, true
		capacity, allocatable := m.Capacity()
		c, a := capacity[res], allocatable[res]
		want := 0
		for _, h := range healthy {
			if h {
				want++
			}
		}
		if c.Value() != int64(len(ids)) || a.Value() != int64(want) {
			t.Fatalf("capacity %s allocatable %s, want %d and %d", &c, &a, len(ids), want)
		}
		if got := p.healthy(); !sort.StringsAreSorted(got) || len(got) != want {
			t.Fatalf("healthy devices %q, want %d sorted", got, want)
		}
	})
}

// FuzzAllocateResponse: any Allocate answer is taken or refused without a
// panic; a taken one survives the checkpoint (entries, then restore after a
// restart) unchanged, and what the container is given is the plugin's
// devices and mounts, each container path once, its environment and
// annotations, and its CDI devices, each name once.
func FuzzAllocateResponse(f *testing.F) {
	addMarshaled(f,
		&pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{{
			Envs:        map[string]string{"NVIDIA_VISIBLE_DEVICES": "gpu-0"},
			Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/nvidia0", HostPath: "/dev/nvidia0", Permissions: "rw"}},
			Mounts:      []*pluginapi.Mount{{ContainerPath: "/usr/lib/nvidia", HostPath: "/usr/lib/nvidia", ReadOnly: true}},
			Annotations: map[string]string{"example.com/devs": "gpu-0"},
		}}},
		&pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{{
			Devices: []*pluginapi.DeviceSpec{{ContainerPath: "/dev/x", HostPath: "/dev/a"}, {ContainerPath: "/dev/x", HostPath: "/dev/b"}},
			Mounts:  []*pluginapi.Mount{{ContainerPath: "/m", HostPath: "/a"}, {ContainerPath: "/m", HostPath: "/b"}},
		}, {}}},
		&pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{{CdiDevices: []*pluginapi.CDIDevice{{Name: "vendor.com/gpu=0"}}}}},
		&pluginapi.AllocateResponse{},
	)
	dir := filepath.Join(f.TempDir(), "device-plugins")
	const res = "example.com/dev"
	f.Fuzz(func(t *testing.T, data []byte) {
		resp := &pluginapi.AllocateResponse{}
		if proto.Unmarshal(data, resp) != nil {
			return
		}
		cr, err := containerResponse(resp)
		if err != nil {
			if len(resp.ContainerResponses) > 0 {
				t.Fatalf("answer %v refused: %v", resp, err)
			}
			return
		}
		m, _ := newFuzzManager(t, dir)
		pod := devPod("a", 1)
		c := &pod.Spec.Containers[0]
		ids := []string{"dev-0"}
		m.allocated.set(string(pod.UID), c.Name, res, &allocation{ids: ids, resp: cr})

		restored := podAllocations{}
		restored.restore(m.allocated.entries())
		if got := restored.get(string(pod.UID), c.Name, res); got == nil || !slices.Equal(got.ids, ids) || !proto.Equal(got.resp, cr) {
			t.Fatalf("restored from the checkpoint: %+v, want %v %v", got, ids, cr)
		}

		opts, err := m.ContainerOptions(pod, c)
		if err != nil {
			t.Fatal(err)
		}
		cdiNames := map[string]bool{}
		for _, d := range cr.CdiDevices {
			cdiNames[d.GetName()] = true
		}
		if len(opts.CdiDevices) != len(cdiNames) {
			t.Fatalf("CDI devices given %v, want each of %v once", opts.CdiDevices, cr.CdiDevices)
		}
		for _, d := range opts.CdiDevices {
			if !cdiNames[d.GetName()] {
				t.Fatalf("CDI device %v given: not the plugin's, or twice", d)
			}
			delete(cdiNames, d.GetName())
		}
		devicePaths, mountPaths := map[string]bool{}, map[string]bool{}
		for _, d := range cr.Devices {
			devicePaths[d.ContainerPath] = true
		}
		for _, mt := range cr.Mounts {
			mountPaths[mt.ContainerPath] = true
		}
		for _, d := range opts.Devices {
			if !slices.Contains(cr.Devices, d) || !devicePaths[d.ContainerPath] {
				t.Fatalf("device %v given: not the plugin's or its path twice", d)
			}
			delete(devicePaths, d.ContainerPath)
		}
		for _, mt := range opts.Mounts {
			if !slices.Contains(cr.Mounts, mt) || !mountPaths[mt.ContainerPath] {
				t.Fatalf("mount %v given: not the plugin's or its path twice", mt)
			}
			delete(mountPaths, mt.ContainerPath)
		}
		if len(devicePaths) > 0 || len(mountPaths) > 0 {
			t.Fatalf("container paths left out: %v %v", devicePaths, mountPaths)
		}
		if !maps.Equal(opts.Envs, cr.Envs) || !maps.Equal(opts.Annotations, cr.Annotations) {
			t.Fatalf("environment %v annotations %v, want %v %v", opts.Envs, opts.Annotations, cr.Envs, cr.Annotations)
		}
	})
}
