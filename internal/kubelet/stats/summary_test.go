package stats

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	critest "k8s.io/cri-api/pkg/apis/testing"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// podList is a PodLister over a fixed list.
type podList []v1.Pod

func (l podList) GetPodByName(namespace, name string) (*v1.Pod, bool) {
	for i := range l {
		if l[i].Namespace == namespace && l[i].Name == name {
			return &l[i], true
		}
	}
	return nil, false
}

var (
	t0 = time.Unix(1700000000, 0)
	t1 = t0.Add(time.Minute)
)

// testEnv is a Provider over the cri-api fakes, a fake host and temp directories.
type testEnv struct {
	rt     *critest.FakeRuntimeService
	img    *critest.FakeImageService
	p      *Provider
	root   string // kubelet root dir
	logs   string // pod logs dir
	layers string // writable layers' mountpoint
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	e := &testEnv{rt: critest.NewFakeRuntimeService(), img: critest.NewFakeImageService()}
	dir := t.TempDir()
	e.root, e.logs, e.layers = filepath.Join(dir, "root"), filepath.Join(dir, "logs"), filepath.Join(dir, "layers")
	for _, d := range []string{e.root, e.logs, e.layers} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	p, err := New(Options{Runtime: e.rt, Images: e.img, NodeName: "node-a", RootDir: e.root, PodLogsDir: e.logs,
		Logger: zaptest.NewLogger(t), Pods: podList{webPod()}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeHost(t)
	f.write("proc/meminfo", testMeminfo)
	f.write("proc/vmstat", testVmstat)
	f.write("proc/stat", testProcStat)
	f.write("proc/net/dev", testNetDev)
	f.write("proc/loadavg", "0 0 0 1/99 5\n")
	p.host = f.reader()
	e.p = p
	e.img.SetFakeFilesystemUsage([]*runtimeapi.FilesystemUsage{{
		Timestamp: t0.UnixNano(), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: e.layers},
		UsedBytes: &runtimeapi.UInt64Value{Value: 12345}, InodesUsed: &runtimeapi.UInt64Value{Value: 67},
	}})
	e.setRuntime()
	e.writeFiles(t)
	return e
}

func webPod() v1.Pod {
	return v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:       v1.PodSpec{Volumes: []v1.Volume{{Name: "cache"}, {Name: "token"}}},
	}
}

func sandbox(id, name, ns, uid string, state runtimeapi.PodSandboxState, created time.Time) *critest.FakePodSandbox {
	return &critest.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{
		Id: id, Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: ns, Uid: uid}, State: state, CreatedAt: created.UnixNano(),
	}}
}

func container(id, sb, name string, state runtimeapi.ContainerState, created time.Time) *critest.FakeContainer {
	return &critest.FakeContainer{SandboxID: sb, ContainerStatus: runtimeapi.ContainerStatus{
		Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: name}, State: state, CreatedAt: created.UnixNano(),
	}}
}

func u64(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }

// setRuntime installs pods default/web (sandbox sb1, containers app and side
// running; an older, stopped sandbox sb0 of the same pod) and kube-system/db (sb2,
// its container exited).
func (e *testEnv) setRuntime() {
	e.rt.SetFakeSandboxes([]*critest.FakePodSandbox{
		sandbox("sb0", "web", "default", "u0", runtimeapi.PodSandboxState_SANDBOX_NOTREADY, t0.Add(-time.Hour)),
		sandbox("sb1", "web", "default", "u1", runtimeapi.PodSandboxState_SANDBOX_READY, t0),
		sandbox("sb2", "db", "kube-system", "u2", runtimeapi.PodSandboxState_SANDBOX_READY, t0),
	})
	e.rt.SetFakeContainers([]*critest.FakeContainer{
		container("c1", "sb1", "app", runtimeapi.ContainerState_CONTAINER_RUNNING, t1),
		container("c3", "sb1", "side", runtimeapi.ContainerState_CONTAINER_RUNNING, t1),
		container("c2", "sb2", "db", runtimeapi.ContainerState_CONTAINER_EXITED, t1),
	})
	app := &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}},
		Cpu:        &runtimeapi.CpuUsage{Timestamp: t1.UnixNano(), UsageCoreNanoSeconds: u64(2e9), UsageNanoCores: u64(5e8)},
		Memory: &runtimeapi.MemoryUsage{Timestamp: t1.UnixNano(), WorkingSetBytes: u64(3000), UsageBytes: u64(4000),
			RssBytes: u64(2000), PageFaults: u64(10), MajorPageFaults: u64(1)},
		WritableLayer: &runtimeapi.FilesystemUsage{Timestamp: t1.UnixNano(), FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: e.layers},
			UsedBytes: u64(1000), InodesUsed: u64(5)},
	}
	side := &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: "c3", Metadata: &runtimeapi.ContainerMetadata{Name: "side"}},
		Memory:     &runtimeapi.MemoryUsage{Timestamp: t1.UnixNano(), WorkingSetBytes: u64(100)},
	}
	db := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Id: "c2", Metadata: &runtimeapi.ContainerMetadata{Name: "db"}}}
	e.rt.SetFakeContainerStats([]*runtimeapi.ContainerStats{app, side, db})
	e.rt.SetFakePodSandboxStats([]*runtimeapi.PodSandboxStats{
		{
			Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb1"},
			Linux: &runtimeapi.LinuxPodSandboxStats{
				Cpu:    &runtimeapi.CpuUsage{Timestamp: t1.UnixNano(), UsageCoreNanoSeconds: u64(3e9), UsageNanoCores: u64(6e8)},
				Memory: &runtimeapi.MemoryUsage{Timestamp: t1.UnixNano(), WorkingSetBytes: u64(5000)},
				Network: &runtimeapi.NetworkUsage{Timestamp: t1.UnixNano(),
					DefaultInterface: &runtimeapi.NetworkInterfaceUsage{Name: "eth0", RxBytes: u64(11)},
					Interfaces:       []*runtimeapi.NetworkInterfaceUsage{{Name: "eth0", RxBytes: u64(11)}}},
				Process:    &runtimeapi.ProcessUsage{Timestamp: t1.UnixNano(), ProcessCount: u64(3)},
				Containers: []*runtimeapi.ContainerStats{app, side},
			},
		},
		{
			Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb2"},
			Linux: &runtimeapi.LinuxPodSandboxStats{
				Cpu:        &runtimeapi.CpuUsage{Timestamp: t1.UnixNano(), UsageCoreNanoSeconds: u64(1)},
				Containers: []*runtimeapi.ContainerStats{db},
			},
		},
	})
}

// writeFiles creates web's volumes, etc-hosts and app's log.
func (e *testEnv) writeFiles(t *testing.T) {
	vols := filepath.Join(e.root, "pods", "u1", "volumes")
	mustWrite(t, filepath.Join(vols, "kubernetes.io~empty-dir", "cache", "data"), make([]byte, 8192))
	mustWrite(t, filepath.Join(vols, "kubernetes.io~secret", "token", "token"), []byte("secret"))
	mustWrite(t, filepath.Join(vols, "kubernetes.io~empty-dir", "notinspec", "x"), []byte("x"))
	mustWrite(t, filepath.Join(vols, "kubernetes.io~csi", "pv", "data"), []byte("x"))
	mustWrite(t, filepath.Join(e.root, "pods", "u1", "etc-hosts"), []byte("127.0.0.1 localhost\n"))
	mustWrite(t, filepath.Join(e.logs, "default_web_u1", "app", "0.log"), make([]byte, 8192))
}

func TestSummaryFull(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	s, err := e.p.Summary(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	checkNode(t, s.Node, true)
	if len(s.Pods) != 2 || s.Pods[0].PodRef != (statsapi.PodReference{Name: "web", Namespace: "default", UID: "u1"}) ||
		s.Pods[1].PodRef.Name != "db" {
		t.Fatalf("pods = %+v, want default/web (u1) then kube-system/db", podRefs(s.Pods))
	}
	web, db := s.Pods[0], s.Pods[1]
	if !web.StartTime.Time.Equal(t0) || ptr.Deref(web.CPU.UsageNanoCores, 0) != 6e8 || *web.Memory.WorkingSetBytes != 5000 {
		t.Errorf("web start %v cpu %+v memory %+v", web.StartTime, web.CPU, web.Memory)
	}
	if web.Network == nil || web.Network.Name != "eth0" || *web.Network.RxBytes != 11 || len(web.Network.Interfaces) != 1 {
		t.Errorf("web network = %+v", web.Network)
	}
	if web.ProcessStats == nil || *web.ProcessStats.ProcessCount != 3 {
		t.Errorf("web process stats = %+v", web.ProcessStats)
	}
	if len(web.Containers) != 2 || web.Containers[0].Name != "app" || web.Containers[1].Name != "side" {
		t.Fatalf("web containers = %+v", web.Containers)
	}
	app, side := web.Containers[0], web.Containers[1]
	if !app.StartTime.Time.Equal(t1) || *app.CPU.UsageCoreNanoSeconds != 2e9 || *app.CPU.UsageNanoCores != 5e8 ||
		*app.Memory.WorkingSetBytes != 3000 || *app.Memory.RSSBytes != 2000 {
		t.Errorf("app = %+v cpu %+v memory %+v", app, app.CPU, app.Memory)
	}
	if app.Rootfs == nil || *app.Rootfs.UsedBytes != 1000 || *app.Rootfs.InodesUsed != 5 || app.Rootfs.CapacityBytes == nil {
		t.Errorf("app rootfs = %+v", app.Rootfs)
	}
	if app.Logs == nil || *app.Logs.UsedBytes < 8192 || *app.Logs.InodesUsed != 1 || app.Logs.CapacityBytes == nil {
		t.Errorf("app logs = %+v", app.Logs)
	}
	// side has no CPU stats: zeros, as upstream; no log directory: no log stats.
	if side.CPU == nil || *side.CPU.UsageCoreNanoSeconds != 0 || side.Logs != nil || side.Swap == nil {
		t.Errorf("side = %+v cpu %+v", side, side.CPU)
	}
	var volumes []string
	var volUsed uint64
	for _, v := range web.VolumeStats {
		volumes = append(volumes, v.Name)
		volUsed += *v.UsedBytes
		if v.CapacityBytes == nil || v.InodesUsed == nil || *v.InodesUsed < 2 {
			t.Errorf("volume %s = %+v", v.Name, v.FsStats)
		}
	}
	if !slices.Equal(volumes, []string{"cache", "token"}) {
		t.Errorf("volumes = %v, want the spec's cache and token", volumes)
	}
	eph := web.EphemeralStorage
	// writable layer 1000 + app log + volumes + etc-hosts.
	if want := 1000 + *app.Logs.UsedBytes + volUsed; eph == nil || *eph.UsedBytes <= want || eph.CapacityBytes == nil {
		t.Errorf("ephemeral storage = %+v, want used above %d", eph, want)
	}
	if len(db.Containers) != 0 || db.CPU == nil || db.VolumeStats != nil {
		t.Errorf("db = %+v, want no containers (its container exited) and its CPU", db)
	}
	checkOneListPerSummary(t, e.rt.GetCalls(), "ListPodSandbox", "ListContainers", "ListPodSandboxStats")
}

func checkNode(t *testing.T, n statsapi.NodeStats, full bool) {
	t.Helper()
	if n.NodeName != "node-a" || n.StartTime.IsZero() {
		t.Errorf("node name %q start %v", n.NodeName, n.StartTime)
	}
	if n.CPU == nil || *n.CPU.UsageCoreNanoSeconds != 1560000000 || n.CPU.UsageNanoCores == nil {
		t.Errorf("node cpu = %+v", n.CPU)
	}
	if n.Memory == nil || *n.Memory.WorkingSetBytes != 512000 || *n.Memory.AvailableBytes != 1000*1024-512000 {
		t.Errorf("node memory = %+v", n.Memory)
	}
	if n.Swap == nil || *n.Swap.SwapUsageBytes != 50*1024 {
		t.Errorf("node swap = %+v", n.Swap)
	}
	if !full {
		if n.Fs != nil || n.Network != nil || n.Runtime != nil || n.Rlimit != nil {
			t.Errorf("CPU and memory only node has fs %v network %v runtime %v rlimit %v", n.Fs, n.Network, n.Runtime, n.Rlimit)
		}
		return
	}
	if n.Fs == nil || n.Fs.CapacityBytes == nil || n.Fs.UsedBytes == nil || n.Fs.InodesUsed == nil {
		t.Errorf("node fs = %+v", n.Fs)
	}
	if n.Network == nil || n.Network.Name != "eth0" || len(n.Network.Interfaces) != 3 {
		t.Errorf("node network = %+v", n.Network)
	}
	if n.Rlimit == nil || ptr.Deref(n.Rlimit.NumOfRunningProcesses, 0) != 99 {
		t.Errorf("node rlimit = %+v", n.Rlimit)
	}
	if n.Runtime == nil || n.Runtime.ImageFs == nil || *n.Runtime.ImageFs.UsedBytes != 12345 || *n.Runtime.ImageFs.InodesUsed != 67 ||
		n.Runtime.ImageFs.CapacityBytes == nil || n.Runtime.ContainerFs != n.Runtime.ImageFs {
		t.Errorf("node runtime = %+v", n.Runtime)
	}
}

func podRefs(pods []statsapi.PodStats) []statsapi.PodReference {
	var out []statsapi.PodReference
	for _, p := range pods {
		out = append(out, p.PodRef)
	}
	return out
}

// checkOneListPerSummary fails unless each named call happened once and no per-pod
// or per-container call happened.
func checkOneListPerSummary(t *testing.T, calls []string, want ...string) {
	t.Helper()
	for _, c := range want {
		if n := count(calls, c); n != 1 {
			t.Errorf("%s called %d times, want once: %v", c, n, calls)
		}
	}
	for _, c := range []string{"PodSandboxStats", "ContainerStats", "ContainerStatus", "PodSandboxStatus"} {
		if count(calls, c) > 0 {
			t.Errorf("per-pod call %s made: %v", c, calls)
		}
	}
}

func count(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if c == name {
			n++
		}
	}
	return n
}

func TestSummaryCPUAndMemoryOnly(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	s, err := e.p.Summary(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	checkNode(t, s.Node, false)
	if len(e.img.Called) != 0 {
		t.Errorf("image service called: %v", e.img.Called)
	}
	web := s.Pods[0]
	if web.Network != nil || web.VolumeStats != nil || web.EphemeralStorage != nil || web.ProcessStats != nil {
		t.Errorf("web has more than CPU and memory: %+v", web)
	}
	side := web.Containers[1]
	if side.Rootfs != nil || side.Logs != nil || side.Memory.AvailableBytes == nil || *side.Memory.PageFaults != 0 ||
		*side.Memory.WorkingSetBytes != 100 {
		t.Errorf("side = %+v memory %+v, want zeros for what the runtime left out", side, side.Memory)
	}
	checkOneListPerSummary(t, e.rt.GetCalls(), "ListPodSandbox", "ListContainers", "ListPodSandboxStats")
}

func TestSummaryFallbackToContainerStats(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.rt.InjectError("ListPodSandboxStats", status.Error(codes.Unimplemented, "not here"))
	for i := range 2 {
		e.rt.Called = nil
		s, err := e.p.Summary(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		calls := e.rt.GetCalls()
		if i == 1 && count(calls, "ListPodSandboxStats") != 0 {
			t.Errorf("ListPodSandboxStats asked again after Unimplemented: %v", calls)
		}
		checkOneListPerSummary(t, calls, "ListPodSandbox", "ListContainers", "ListContainerStats")
		// db has no running container, so no stats in this mode (as upstream).
		if len(s.Pods) != 1 || s.Pods[0].PodRef.UID != "u1" {
			t.Fatalf("pods = %v, want web only", podRefs(s.Pods))
		}
		web := s.Pods[0]
		if len(web.Containers) != 2 || *web.CPU.UsageCoreNanoSeconds != 2e9 || *web.Memory.WorkingSetBytes != 3100 {
			t.Errorf("web cpu %+v memory %+v, want the containers' sums", web.CPU, web.Memory)
		}
		if web.EphemeralStorage == nil || len(web.VolumeStats) != 2 {
			t.Errorf("web storage: ephemeral %+v volumes %d", web.EphemeralStorage, len(web.VolumeStats))
		}
	}
}

func TestSummaryErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc   string
		inject func(e *testEnv)
	}{
		{desc: "ListPodSandboxStats fails", inject: func(e *testEnv) {
			e.rt.InjectError("ListPodSandboxStats", status.Error(codes.Unavailable, "down"))
		}},
		{desc: "ListPodSandbox fails", inject: func(e *testEnv) { e.rt.InjectError("ListPodSandbox", errors.New("boom")) }},
		{desc: "ListContainers fails", inject: func(e *testEnv) { e.rt.InjectError("ListContainers", errors.New("boom")) }},
		{desc: "ImageFsInfo fails", inject: func(e *testEnv) { e.img.InjectError("ImageFsInfo", errors.New("boom")) }},
		{desc: "no image filesystem", inject: func(e *testEnv) { e.img.SetFakeFilesystemUsage(nil) }},
		{desc: "root dir gone", inject: func(e *testEnv) { e.p.rootDir = filepath.Join(e.root, "missing") }},
		{desc: "no cgroup nor /proc figures", inject: func(e *testEnv) { e.p.host = newFakeHost(t).reader() }},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t)
			tc.inject(e)
			if s, err := e.p.Summary(context.Background(), false); err == nil {
				t.Errorf("Summary = %+v, want an error", s.Node)
			}
		})
	}
}

func TestContainerRateFallback(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	sampleAt := func(at time.Time, usage uint64) {
		st := &runtimeapi.ContainerStats{
			Attributes: &runtimeapi.ContainerAttributes{Id: "c1", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}},
			Cpu:        &runtimeapi.CpuUsage{Timestamp: at.UnixNano(), UsageCoreNanoSeconds: u64(usage)},
		}
		e.rt.SetFakePodSandboxStats([]*runtimeapi.PodSandboxStats{{
			Attributes: &runtimeapi.PodSandboxAttributes{Id: "sb1"},
			Linux:      &runtimeapi.LinuxPodSandboxStats{Containers: []*runtimeapi.ContainerStats{st}},
		}})
	}
	rate := func() *uint64 {
		s, err := e.p.Summary(context.Background(), true)
		if err != nil {
			t.Fatal(err)
		}
		return s.Pods[0].Containers[0].CPU.UsageNanoCores
	}
	now := time.Now()
	sampleAt(now, 1e9)
	if r := rate(); r != nil {
		t.Errorf("first rate = %d, want none", *r)
	}
	sampleAt(now.Add(2*time.Second), 2e9) // one core-second in two seconds
	if r := rate(); r == nil || *r != 5e8 {
		t.Errorf("rate = %v, want 5e8", r)
	}
	sampleAt(now.Add(2500*time.Millisecond), 3e9) // too close: the last rate
	if r := rate(); r == nil || *r != 5e8 {
		t.Errorf("rate of a close sample = %v, want the last 5e8", r)
	}
}

func TestRemoveTerminatedPods(t *testing.T) {
	t.Parallel()
	sb := func(id, name string, ready bool, created int64) *runtimeapi.PodSandbox {
		st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		if ready {
			st = runtimeapi.PodSandboxState_SANDBOX_READY
		}
		return &runtimeapi.PodSandbox{Id: id, Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "ns"}, State: st, CreatedAt: created}
	}
	for _, tc := range []struct {
		desc string
		in   []*runtimeapi.PodSandbox
		want []string
	}{
		{desc: "single sandboxes stay, ready or not", in: []*runtimeapi.PodSandbox{sb("a", "x", false, 1), sb("b", "y", true, 1)}, want: []string{"a", "b"}},
		{desc: "the ready one of a pod wins", in: []*runtimeapi.PodSandbox{sb("new", "x", true, 2), sb("old", "x", false, 1)}, want: []string{"new"}},
		{desc: "none ready: the newest", in: []*runtimeapi.PodSandbox{sb("b", "x", false, 2), sb("a", "x", false, 1), sb("c", "x", false, 3)}, want: []string{"c"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, s := range removeTerminatedPods(tc.in) {
				got = append(got, s.Id)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRateCache(t *testing.T) {
	t.Parallel()
	sec := int64(time.Second)
	for _, tc := range []struct {
		desc      string
		samples   [][2]int64 // usage, at
		wantRate  *uint64
		wantFirst bool
	}{
		{desc: "first sample", samples: [][2]int64{{10, 0}}, wantFirst: true},
		{desc: "two samples", samples: [][2]int64{{0, 0}, {sec / 2, sec}}, wantRate: ptr.To[uint64](5e8)},
		{desc: "counter reset starts over", samples: [][2]int64{{100, 0}, {200, sec}, {5, 2 * sec}}},
		{desc: "too close keeps the last rate", samples: [][2]int64{{0, 0}, {sec, sec}, {10 * sec, sec + 1}}, wantRate: ptr.To[uint64](1e9)},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			c := newRateCache()
			var rate *uint64
			var first bool
			for _, s := range tc.samples {
				rate, first = c.update("k", uint64(s[0]), s[1], time.Second)
			}
			if !ptr.Equal(rate, tc.wantRate) || first != tc.wantFirst {
				t.Errorf("rate %v first %v, want %v %v", ptr.Deref(rate, 0), first, ptr.Deref(tc.wantRate, 0), tc.wantFirst)
			}
		})
	}
	c := newRateCache()
	c.update("old", 1, 0, time.Second)
	c.prune(time.Unix(0, 0).Add(rateEntryTTL + time.Second))
	if len(c.entries) != 0 {
		t.Errorf("prune left %d entries", len(c.entries))
	}
}

// The node's memory limit is the machine's memory handed in, not each
// sample's MemTotal.
func TestSummaryNodeMemoryCapacity(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t)
	e.p.memory = 2000 * 1024
	s, err := e.p.Summary(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if m := s.Node.Memory; m == nil || *m.AvailableBytes != 2000*1024-512000 {
		t.Errorf("node memory = %+v, want available = 2000Ki - working set", m)
	}
}
