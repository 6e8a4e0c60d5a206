package nodestatus

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

const (
	gi = int64(1) << 30
	mi = int64(1) << 20
)

// fakePressure is the eviction manager's conditions; it can be changed under mu.
type fakePressure struct {
	mu                sync.Mutex
	memory, disk, pid bool
}

func (p *fakePressure) IsUnderMemoryPressure() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.memory
}
func (p *fakePressure) IsUnderDiskPressure() bool { p.mu.Lock(); defer p.mu.Unlock(); return p.disk }
func (p *fakePressure) IsUnderPIDPressure() bool  { p.mu.Lock(); defer p.mu.Unlock(); return p.pid }

func (p *fakePressure) setMemory(v bool) { p.mu.Lock(); defer p.mu.Unlock(); p.memory = v }

// testMachine is a 4-CPU, 8Gi, 100Gi-disk machine.
func testMachine() resources.Machine {
	return resources.Machine{
		NumCPU: 4, MemoryCapacity: 8 * gi, RootFsCapacity: 100 * gi,
		KernelVersion: "6.1.0-test", OSImage: "Debian GNU/Linux 12 (bookworm)",
		MachineID: "machine-id", SystemUUID: "system-uuid", BootID: "boot-1",
	}
}

// testResources builds the node's resources from opts (the testMachine when
// opts.Machine is unset).
func testResources(t *testing.T, opts resources.Options) *resources.Node {
	t.Helper()
	if opts.Machine.NumCPU == 0 {
		opts.Machine = testMachine()
	}
	n, err := resources.New(opts)
	if err != nil {
		t.Fatalf("resources.New: %v", err)
	}
	return n
}

// fakeRuntime answers Version with fixed values or err.
type fakeRuntime struct {
	name, version string
	err           error
}

func (r fakeRuntime) Version(context.Context) (string, string, error) {
	return r.name, r.version, r.err
}

// testController builds a controller on a fake clientset, fake pressure and a fake
// clock; opts gets the required fields filled when empty.
func testController(t *testing.T, opts Options) (*Controller, *fake.Clientset, *fakePressure, *clocktesting.FakeClock, *record.FakeRecorder) {
	t.Helper()
	client := fake.NewClientset()
	if opts.Client == nil {
		opts.Client = client
	}
	if opts.NodeName == "" {
		opts.NodeName = "node-a"
	}
	if opts.NodeIPs == nil {
		opts.NodeIPs = []net.IP{net.ParseIP("10.0.0.5")}
	}
	if opts.Runtime == nil {
		opts.Runtime = fakeRuntime{name: "docker", version: "20.10.24"}
	}
	if opts.KubeletVersion == "" {
		opts.KubeletVersion = "v1.37.1"
	}
	if opts.Resources == nil {
		opts.Resources = testResources(t, resources.Options{})
	}
	h := &fakePressure{}
	if opts.Pressure == nil {
		opts.Pressure = h
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	rec := record.NewFakeRecorder(100)
	opts.Clock, opts.Recorder, opts.Logger = clk, rec, zaptest.NewLogger(t)
	c, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	c.localIP = func(net.IP) error { return nil }
	c.lookupIP = func(string) ([]net.IP, error) { return nil, &net.DNSError{Err: "no such host", IsNotFound: true} }
	c.defaultRouteIP = func(net.IP) (net.IP, error) { return net.ParseIP("192.0.2.2"), nil }
	return c, client, h, clk, rec
}

// drainEvents returns the events recorded so far.
func drainEvents(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func condition(node *v1.Node, t v1.NodeConditionType) v1.NodeCondition {
	if c := findCondition(node.Status.Conditions, t); c != nil {
		return *c
	}
	return v1.NodeCondition{}
}
