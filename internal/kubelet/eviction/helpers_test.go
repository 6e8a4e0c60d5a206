package eviction

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
)

// Shared builders and hand-written fakes of the package's tests.

const (
	ki = int64(1024)
	mi = 1024 * ki
	gi = 1024 * mi
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func u64(v int64) *uint64 { u := uint64(v); return &u }
func i64(v int64) *int64  { return &v }

func qty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// hardQ and softQ build quantity thresholds; pct builds a percentage one.
func hardQ(signal, q string) Threshold {
	return Threshold{Threshold: resources.Threshold{Signal: signal, Quantity: qty(q)}}
}

func softQ(signal, q string, grace time.Duration) Threshold {
	t := hardQ(signal, q)
	t.GracePeriod = grace
	return t
}

func pct(signal string, p float32) Threshold {
	return Threshold{Threshold: resources.Threshold{Signal: signal, Percentage: p}}
}

func withMinReclaim(t Threshold, q string) Threshold {
	t.MinReclaim = &resources.Threshold{Signal: t.Signal, Quantity: qty(q)}
	return t
}

// describe renders thresholds for comparison: signal<value [grace] [+minReclaim].
func describe(ts []Threshold) []string {
	out := []string{}
	for _, t := range ts {
		s := t.Signal + "<" + value(t.Threshold)
		if t.GracePeriod != 0 {
			s += " grace=" + t.GracePeriod.String()
		}
		if t.MinReclaim != nil {
			s += " +" + value(*t.MinReclaim)
		}
		out = append(out, s)
	}
	return out
}

func value(t resources.Threshold) string {
	if t.Quantity != nil {
		return t.Quantity.String()
	}
	return fmt.Sprintf("%.4g%%", t.Percentage*100)
}

// podOpt changes a pod under construction.
type podOpt func(*v1.Pod)

// newPod builds a pod with one container "app"; its UID is its name.
func newPod(name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name), Generation: 3},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func priorityOf(v int32) podOpt { return func(p *v1.Pod) { p.Spec.Priority = &v } }

func annotated(k, v string) podOpt {
	return func(p *v1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

// requests sets the requests of container "app" ("memory", "1Gi", ...).
func requests(kv ...string) podOpt {
	return func(p *v1.Pod) { p.Spec.Containers[0].Resources.Requests = list(kv...) }
}

// limits sets the limits of container "app".
func limits(kv ...string) podOpt {
	return func(p *v1.Pod) { p.Spec.Containers[0].Resources.Limits = list(kv...) }
}

func list(kv ...string) v1.ResourceList {
	l := v1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func volumes(vs ...v1.Volume) podOpt {
	return func(p *v1.Pod) { p.Spec.Volumes = append(p.Spec.Volumes, vs...) }
}

func graceSeconds(s int64) podOpt {
	return func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s }
}

func emptyDir(name string, medium v1.StorageMedium, limit string) v1.Volume {
	ed := &v1.EmptyDirVolumeSource{Medium: medium}
	if limit != "" {
		ed.SizeLimit = qty(limit)
	}
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: ed}}
}

// podMem is a pod's stats with container "app" using ws bytes of memory.
func podMem(pod *v1.Pod, ws int64) statsapi.PodStats {
	return statsapi.PodStats{
		PodRef:     statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
		Memory:     &statsapi.MemoryStats{WorkingSetBytes: u64(ws)},
		Containers: []statsapi.ContainerStats{{Name: "app", Memory: &statsapi.MemoryStats{WorkingSetBytes: u64(ws)}}},
	}
}

// podDisk is a pod's stats with container "app" using rootfs and logs bytes,
// and the volumes' used bytes (name, bytes, ...).
func podDisk(pod *v1.Pod, rootfs, logs int64, vols ...any) statsapi.PodStats {
	s := statsapi.PodStats{
		PodRef: statsapi.PodReference{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID)},
		Containers: []statsapi.ContainerStats{{Name: "app",
			Rootfs: &statsapi.FsStats{UsedBytes: u64(rootfs), InodesUsed: u64(rootfs / ki)},
			Logs:   &statsapi.FsStats{UsedBytes: u64(logs), InodesUsed: u64(logs / ki)}}},
	}
	for i := 0; i+1 < len(vols); i += 2 {
		b := vols[i+1].(int64)
		s.VolumeStats = append(s.VolumeStats, statsapi.VolumeStats{Name: vols[i].(string),
			FsStats: statsapi.FsStats{UsedBytes: u64(b), InodesUsed: u64(b / ki)}})
	}
	return s
}

// memNode is a node sample at `at` with the given available memory and
// working set, and a roomy root filesystem.
func memNode(at time.Time, avail, ws int64) *statsapi.NodeStats {
	return &statsapi.NodeStats{
		Memory: &statsapi.MemoryStats{Time: metav1.NewTime(at), AvailableBytes: u64(avail), WorkingSetBytes: u64(ws), UsageBytes: u64(ws)},
		Fs:     fsStats(at, 90*gi, 100*gi),
	}
}

func fsStats(at time.Time, avail, capacity int64) *statsapi.FsStats {
	return &statsapi.FsStats{Time: metav1.NewTime(at), AvailableBytes: u64(avail), CapacityBytes: u64(capacity),
		InodesFree: u64(900_000), Inodes: u64(1_000_000)}
}

// fakeStats is a StatsProvider whose samples the test sets.
type fakeStats struct {
	mu           sync.Mutex
	node         *statsapi.NodeStats
	pods         []statsapi.PodStats
	dedicated    bool
	nodeCalls    int
	summaryCalls int
}

func (f *fakeStats) NodeStats(context.Context) (*statsapi.NodeStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodeCalls++
	n := *f.node
	return &n, nil
}

func (f *fakeStats) Summary(context.Context, bool) (*statsapi.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.summaryCalls++
	return &statsapi.Summary{Node: *f.node, Pods: append([]statsapi.PodStats{}, f.pods...)}, nil
}

func (f *fakeStats) HasDedicatedImageFs(context.Context) (bool, error) { return f.dedicated, nil }

func (f *fakeStats) set(node *statsapi.NodeStats, pods ...statsapi.PodStats) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.node, f.pods = node, pods
}

func (f *fakeStats) calls() (node, summary int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.nodeCalls, f.summaryCalls
}

// killCall is one recorded KillPod call with the status its func produced.
type killCall struct {
	pod    *v1.Pod
	grace  int64
	status v1.PodStatus
}

type fakeKiller struct {
	mu    sync.Mutex
	calls []killCall
}

func (f *fakeKiller) kill(_ context.Context, pod *v1.Pod, grace int64, status func(*v1.PodStatus)) error {
	st := v1.PodStatus{Phase: v1.PodRunning}
	status(&st)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, killCall{pod: pod, grace: grace, status: st})
	return nil
}

func (f *fakeKiller) killed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []string{}
	for _, c := range f.calls {
		out = append(out, c.pod.Name)
	}
	return out
}

type podEvent struct {
	pod                        string
	annotations                map[string]string
	eventType, reason, message string
}

// fakeRecorder keeps the events: about pods (pods) and about the node
// (node, "type reason message").
type fakeRecorder struct{ eventtest.Recorder }

var testNode = &v1.ObjectReference{Kind: "Node", Name: "n"}

func (f *fakeRecorder) pods() []podEvent {
	var out []podEvent
	for _, e := range f.Events() {
		if p := e.Pod(); p != nil {
			out = append(out, podEvent{p.Name, e.Annotations, e.Type, e.Reason, e.Message})
		}
	}
	return out
}

func (f *fakeRecorder) node() []string {
	var out []string
	for _, e := range f.Events() {
		if e.Object == testNode {
			out = append(out, e.String())
		}
	}
	return out
}

func metaTime(t time.Time) metav1.Time { return metav1.NewTime(t) }
