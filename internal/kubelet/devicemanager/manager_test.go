package devicemanager

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/devicemanager/checkpoint"
)

// testResources records what the manager publishes.
type testResources struct {
	mu                    sync.Mutex
	capacity, allocatable v1.ResourceList
}

func (r *testResources) SetDeviceResources(c, a v1.ResourceList) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.capacity, r.allocatable = c, a
	return nil
}

func (r *testResources) counts(name string) (int64, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, a := r.capacity[v1.ResourceName(name)], r.allocatable[v1.ResourceName(name)]
	return c.Value(), a.Value()
}

// testPlugin is a device plugin answering over a real socket.
type testPlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	updates   chan []*pluginapi.Device
	preferred []string
	mu        sync.Mutex
	allocated [][]string
	// block, when set, holds Allocate until it is closed (entered is
	// signalled first).
	block, entered chan struct{}
}

func (p *testPlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: p.preferred != nil}, nil
}

func (p *testPlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		select {
		case d := <-p.updates:
			if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: d}); err != nil {
				return err
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *testPlugin) GetPreferredAllocation(context.Context, *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: p.preferred}}}, nil
}

func (p *testPlugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	if p.block != nil {
		p.entered <- struct{}{}
		<-p.block
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ids := req.ContainerRequests[0].DevicesIds
	p.allocated = append(p.allocated, ids)
	return &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{{
		Envs:        map[string]string{"DEVS": strings.Join(ids, ",")},
		Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/x", HostPath: "/dev/null", Permissions: "rw"}},
		Annotations: map[string]string{"example.com/devs": strings.Join(ids, ",")},
	}}}, nil
}

func devices(healthy ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range []string{"a", "b", "c"} {
		h := pluginapi.Unhealthy
		if slices.Contains(healthy, id) {
			h = pluginapi.Healthy
		}
		out = append(out, &pluginapi.Device{ID: id, Health: h})
	}
	return out
}

func devPod(uid string, limit int64) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: k8stypes.UID("uid-" + uid)}, Spec: v1.PodSpec{Containers: []v1.Container{{
		Name: "main", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{"example.com/dev": *resource.NewQuantity(limit, resource.DecimalSI)}},
	}}}}
}

// startTest runs a manager on a temp dir (short: unix socket paths are
// limited to 108 bytes) with pods as the active pods.
func startTest(t *testing.T, dir string, pods *[]*v1.Pod) (*Manager, *testResources, context.CancelFunc) {
	t.Helper()
	res := &testResources{}
	m, err := New(Options{Dir: dir, Resources: res, ActivePods: func() []*v1.Pod { return *pods }, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return m, res, cancel
}

func servePlugin(t *testing.T, dir string, p *testPlugin) {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(dir, "test.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
}

func register(t *testing.T, dir string, req *pluginapi.RegisterRequest) error {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, SocketName), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, req)
	return err
}

func waitCounts(t *testing.T, res *testResources, c, a int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		gc, ga := res.counts("example.com/dev")
		if gc == c && ga == a {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("capacity %d allocatable %d, want %d and %d", gc, ga, c, a)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRegisterAllocateRestart(t *testing.T) {
	dir, err := os.MkdirTemp("", "dm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var pods []*v1.Pod
	m, res, stop := startTest(t, dir, &pods)
	plugin := &testPlugin{updates: make(chan []*pluginapi.Device, 4), preferred: []string{"c"}}
	servePlugin(t, dir, plugin)
	plugin.updates <- devices("a", "b", "c")

	for _, tc := range []struct {
		req  *pluginapi.RegisterRequest
		want string
	}{
		{&pluginapi.RegisterRequest{Version: "v1", Endpoint: "test.sock", ResourceName: "example.com/dev"}, `requested API version "v1" is not supported by kubelet`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "test.sock", ResourceName: "cpu"}, `the ResourceName "cpu" is invalid`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "test.sock", ResourceName: "kubernetes.io/dev"}, `the ResourceName "kubernetes.io/dev" is invalid`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "/tmp/x.sock", ResourceName: "example.com/dev"}, `invalid endpoint "/tmp/x.sock"`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "..", ResourceName: "example.com/dev"}, `invalid endpoint ".."`},
	} {
		if err := register(t, dir, tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Register(%v) = %v, want %q", tc.req, err, tc.want)
		}
	}
	if err := register(t, dir, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "test.sock", ResourceName: "example.com/dev"}); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, res, 3, 3)

	// The plugin's preferred device is taken.
	one := devPod("one", 1)
	pods = []*v1.Pod{one}
	if err := m.Allocate(one, &one.Spec.Containers[0], false); err != nil {
		t.Fatal(err)
	}
	opts, err := m.ContainerOptions(one, &one.Spec.Containers[0])
	if err != nil || opts.Envs["DEVS"] != "c" || len(opts.Devices) != 1 || opts.Annotations["example.com/devs"] != "c" {
		t.Errorf("ContainerOptions = %v, %v", opts, err)
	}
	// Allocating again keeps what the container has.
	if err := m.Allocate(one, &one.Spec.Containers[0], false); err != nil || len(plugin.allocated) != 1 {
		t.Errorf("second Allocate: %v, %d Allocate calls", err, len(plugin.allocated))
	}
	// b turns unhealthy: only a is left.
	plugin.updates <- devices("a", "c")
	waitCounts(t, res, 3, 2)
	two := devPod("two", 2)
	pods = append(pods, two)
	err = m.Allocate(two, &two.Spec.Containers[0], false)
	if err == nil || err.Error() != "requested number of devices unavailable for example.com/dev. Requested: 2, Available: 1" {
		t.Errorf("Allocate beyond the free devices: %v", err)
	}
	plugin.preferred = nil
	small := devPod("small", 1)
	pods = append(pods, small)
	if err := m.Allocate(small, &small.Spec.Containers[0], false); err != nil {
		t.Fatal(err)
	}
	if got := m.PodDevices(small.UID)["main"]["example.com/dev"]; !slices.Equal(got, []string{"a"}) {
		t.Errorf("small got %v, want a", got)
	}

	// A restart keeps the allocations (checkpoint) and counts the resource
	// 0 until its plugin registers again.
	stop()
	m.Wait() // the old manager removed its socket before the new one makes it
	entries, registered, err := checkpoint.Read(dir)
	if err != nil || len(entries) != 2 || !slices.Equal(registered["example.com/dev"], []string{"a", "b", "c"}) {
		t.Fatalf("checkpoint: %v %v %v", entries, registered, err)
	}
	m2, res2, stop2 := startTest(t, dir, &pods)
	defer stop2()
	waitCounts(t, res2, 0, 0)
	if got := m2.PodDevices(one.UID)["main"]["example.com/dev"]; !slices.Equal(got, []string{"c"}) {
		t.Errorf("after the restart one holds %v, want c", got)
	}
	// Admitted again after the restart (not active yet while it is being
	// admitted), one keeps its device.
	pods = nil
	if err := m2.Allocate(one, &one.Spec.Containers[0], false); err != nil {
		t.Fatal(err)
	}
	if got := m2.PodDevices(one.UID)["main"]["example.com/dev"]; !slices.Equal(got, []string{"c"}) {
		t.Errorf("re-admitted one holds %v, want c", got)
	}
	// One pod went away: its device is free for the next one.
	servePlugin2 := &testPlugin{updates: make(chan []*pluginapi.Device, 4)}
	_ = os.Remove(filepath.Join(dir, "test.sock"))
	servePlugin(t, dir, servePlugin2)
	servePlugin2.updates <- devices("a", "b", "c")
	if err := register(t, dir, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "test.sock", ResourceName: "example.com/dev"}); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, res2, 3, 3)
	pods = []*v1.Pod{one}
	again := devPod("again", 2)
	pods = append(pods, again)
	if err := m2.Allocate(again, &again.Spec.Containers[0], false); err != nil {
		t.Fatal(err)
	}
	if got := m2.PodDevices(again.UID)["main"]["example.com/dev"]; !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("again got %v, want a and b (small's a freed)", got)
	}
}

// TestRemovePod: a pod that got devices and was then rejected gives them
// back at once (though still listed as active), in memory and in the
// checkpoint; removing a pod without devices does nothing.
func TestRemovePod(t *testing.T) {
	dir, err := os.MkdirTemp("", "dm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	rejected, next := devPod("rejected", 2), devPod("next", 2)
	pods := []*v1.Pod{rejected, next}
	m, res, stop := startTest(t, dir, &pods)
	defer stop()
	plugin := &testPlugin{updates: make(chan []*pluginapi.Device, 4)}
	servePlugin(t, dir, plugin)
	plugin.updates <- devices("a", "b")
	if err := register(t, dir, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "test.sock", ResourceName: "example.com/dev"}); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, res, 3, 2) // c is unhealthy
	if err := m.Allocate(rejected, &rejected.Spec.Containers[0], false); err != nil {
		t.Fatal(err)
	}
	if err := m.Allocate(next, &next.Spec.Containers[0], false); err == nil {
		t.Fatal("both devices are taken, yet a second pod got them")
	}
	if err := m.RemovePod(string(rejected.UID)); err != nil {
		t.Fatal(err)
	}
	if got := m.PodDevices(rejected.UID); len(got) != 0 {
		t.Errorf("the removed pod still holds %v", got)
	}
	entries, _, err := checkpoint.Read(dir)
	if err != nil || len(entries) != 0 {
		t.Errorf("checkpoint after RemovePod: %v, %v; want no entry", entries, err)
	}
	if err := m.Allocate(next, &next.Spec.Containers[0], false); err != nil {
		t.Errorf("the released devices are not free: %v", err)
	}
	if err := m.RemovePod("uid-none"); err != nil {
		t.Errorf("RemovePod of a pod without devices: %v", err)
	}
}

// TestSlowPluginDoesNotBlockReaders: while a plugin's Allocate hangs, the
// manager still answers what containers hold (container starts, the
// PodResources API) and takes health updates; the allocation then ends.
func TestSlowPluginDoesNotBlockReaders(t *testing.T) {
	dir, err := os.MkdirTemp("", "dm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	first, slow := devPod("first", 1), devPod("slow", 1)
	pods := []*v1.Pod{first, slow}
	m, res, stop := startTest(t, dir, &pods)
	defer stop()
	plugin := &testPlugin{updates: make(chan []*pluginapi.Device, 4)}
	servePlugin(t, dir, plugin)
	plugin.updates <- devices("a", "b", "c")
	if err := register(t, dir, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "test.sock", ResourceName: "example.com/dev"}); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, res, 3, 3)
	if err := m.Allocate(first, &first.Spec.Containers[0], false); err != nil {
		t.Fatal(err)
	}
	plugin.block, plugin.entered = make(chan struct{}), make(chan struct{}, 1)
	done := make(chan error, 1)
	go func() { done <- m.Allocate(slow, &slow.Spec.Containers[0], false) }()
	<-plugin.entered
	read := make(chan struct{})
	go func() {
		defer close(read)
		if got := m.PodDevices(first.UID); len(got["main"]["example.com/dev"]) != 1 {
			t.Errorf("PodDevices(first) = %v", got)
		}
		if _, err := m.ContainerOptions(first, &first.Spec.Containers[0]); err != nil {
			t.Errorf("ContainerOptions(first): %v", err)
		}
	}()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("readers blocked by a plugin's hanging Allocate")
	}
	plugin.updates <- devices("a", "b")
	waitCounts(t, res, 3, 2)
	close(plugin.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := m.PodDevices(slow.UID); len(got["main"]["example.com/dev"]) != 1 {
		t.Errorf("PodDevices(slow) = %v", got)
	}
}

// TestCheckpointChecksum: a changed checkpoint is refused.
func TestCheckpointChecksum(t *testing.T) {
	dir := t.TempDir()
	entries := []checkpoint.PodDevicesEntry{{PodUID: "u", ContainerName: "c", ResourceName: "example.com/dev",
		DeviceIDs: checkpoint.DevicesPerNUMA{-1: {"a"}}, AllocResp: []byte{1}}}
	if err := checkpoint.Write(dir, entries, map[string][]string{"example.com/dev": {"a"}}); err != nil {
		t.Fatal(err)
	}
	got, _, err := checkpoint.Read(dir)
	if err != nil || len(got) != 1 || got[0].PodUID != "u" {
		t.Fatalf("Read = %v, %v", got, err)
	}
	path := filepath.Join(dir, checkpoint.FileName)
	b, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), `"u"`, `"v"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := checkpoint.Read(dir); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Errorf("Read of a changed checkpoint = %v, want ErrCorrupt", err)
	}
}

// TestReuseInitDevices: an app container reuses its regular init
// container's devices, not a sidecar's.
func TestReuseInitDevices(t *testing.T) {
	m := &Manager{allocated: podAllocations{}}
	pod := devPod("p", 1)
	pod.Spec.InitContainers = []v1.Container{{Name: "init"}, {Name: "side", RestartPolicy: ptr.To(v1.ContainerRestartPolicyAlways)}}
	m.allocated.set(string(pod.UID), "init", "example.com/dev", &allocation{ids: []string{"a"}})
	m.allocated.set(string(pod.UID), "side", "example.com/dev", &allocation{ids: []string{"b"}})
	if got := m.reusable(pod, &pod.Spec.Containers[0], false, "example.com/dev"); !got.Has("a") || got.Has("b") {
		t.Errorf("reusable = %v, want a only", got)
	}
	if got := m.reusable(pod, &pod.Spec.InitContainers[1], true, "example.com/dev"); got.Len() != 0 {
		t.Errorf("a sidecar reuses %v", got)
	}
}
