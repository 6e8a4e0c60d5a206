package kubelet

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/cpuset"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/admission"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/cm/topologymanager"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// heldAllocations is a fake CPU manager and device allocator that records
// which containers hold something; fail makes Allocate refuse a container.
type heldAllocations struct {
	mu    sync.Mutex
	held  map[k8stypes.UID][]string // pod -> containers
	fail  string                    // container name Allocate refuses
	err   string                    // its error
	calls int
}

func (h *heldAllocations) allocate(pod *v1.Pod, c *v1.Container) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if c.Name == h.fail {
		return errors.New(h.err)
	}
	if h.held == nil {
		h.held = map[k8stypes.UID][]string{}
	}
	if !slices.Contains(h.held[pod.UID], c.Name) {
		h.held[pod.UID] = append(h.held[pod.UID], c.Name)
	}
	return nil
}

func (h *heldAllocations) removePod(uid string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.held, k8stypes.UID(uid))
	return nil
}

func (h *heldAllocations) of(uid k8stypes.UID) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.held[uid])
}

// The fakes are topology manager hint providers without preferences.
func (h *heldAllocations) TopologyHints(*v1.Pod, *v1.Container) map[string][]topologymanager.Hint {
	return nil
}
func (h *heldAllocations) PodTopologyHints(*v1.Pod) map[string][]topologymanager.Hint { return nil }
func (h *heldAllocations) AllocateAligned(pod *v1.Pod, c *v1.Container, _ topologymanager.Hint) error {
	return h.allocate(pod, c)
}

type fakeCPUs struct{ heldAllocations }

func (f *fakeCPUs) RemovePod(uid string) error { return f.removePod(uid) }
func (f *fakeCPUs) ExclusiveCPUs(uid, name string) (cpuset.CPUSet, bool) {
	if slices.Contains(f.of(k8stypes.UID(uid)), name) {
		return cpuset.New(1), true
	}
	return cpuset.CPUSet{}, false
}

type fakeDevices struct{ heldAllocations }

func (f *fakeDevices) RemovePod(uid string) error { return f.removePod(uid) }
func (f *fakeDevices) PodDevices(uid k8stypes.UID) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for _, c := range f.of(uid) {
		out[c] = map[string][]string{"example.com/dev": {"d-" + c}}
	}
	return out
}

// refuse is an admit handler that refuses every pod.
type refuse struct{ reason string }

func (r refuse) Admit(*v1.Pod) (string, string, bool) {
	return r.reason, "refused by " + r.reason, false
}

// TestAdmissionReleasesAllocations: a pod that got CPUs and devices and is
// then rejected by a later handler holds neither afterwards; a pod a handler
// refuses before resource allocation gets nothing; an admitted pod keeps what
// it got; a pod that held CPUs before admission (restored after a kubelet
// restart) keeps them when rejected. Devices come before CPUs, container by
// container, as upstream's topology manager allocates: the device error wins.
func TestAdmissionReleasesAllocations(t *testing.T) {
	t.Parallel()
	pod := func(uid string, windows bool) *v1.Pod {
		return staticPod("p-"+uid, uid, func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox"}}
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "second", Image: "busybox"})
			if windows {
				p.Spec.OS = &v1.PodOS{Name: v1.Windows}
			}
		})
	}
	all := []string{"init", "c", "second"}
	for _, tc := range []struct {
		desc                  string
		node                  NodeAdmitters
		windows               bool // the predicates refuse it (PodOSNotSupported)
		cpuFail, deviceFail   string
		heldCPUs              []string // CPUs the pod held before admission
		wantReason, wantMsg   string   // "" admitted
		wantCPUs, wantDevices []string
		wantNoCalls           bool
	}{
		{desc: "admitted: keeps its CPUs and devices", wantCPUs: all, wantDevices: all},
		{desc: "the node shutdown refuses it last", node: NodeAdmitters{Shutdown: refuse{"Terminated"}}, wantReason: "Terminated"},
		{desc: "the predicates refuse it", windows: true, wantReason: admission.ReasonOSNotSupported},
		{desc: "its second container gets no device", deviceFail: "second", wantReason: "UnexpectedAdmissionError",
			wantMsg: "Pod was rejected: Allocate failed due to no device, which is unexpected"},
		{desc: "its second container gets no CPU", cpuFail: "second", wantReason: "UnexpectedAdmissionError",
			wantMsg: "Pod was rejected: Allocate failed due to no CPU, which is unexpected"},
		{desc: "its second container gets neither: the device error", cpuFail: "second", deviceFail: "second",
			wantReason: "UnexpectedAdmissionError", wantMsg: "Pod was rejected: Allocate failed due to no device, which is unexpected"},
		{desc: "node pressure refuses it before any allocation", node: NodeAdmitters{Pressure: refuse{"Evicted"}},
			wantReason: "Evicted", wantNoCalls: true},
		{desc: "restored CPUs are kept on rejection", heldCPUs: []string{"c"}, node: NodeAdmitters{Shutdown: refuse{"Terminated"}},
			wantReason: "Terminated", wantCPUs: all, wantDevices: all},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			cpus := &fakeCPUs{heldAllocations{fail: tc.cpuFail, err: "no CPU"}}
			devices := &fakeDevices{heldAllocations{fail: tc.deviceFail, err: "no device"}}
			p := pod("uid-p", tc.windows)
			if len(tc.heldCPUs) > 0 {
				cpus.held = map[k8stypes.UID][]string{p.UID: slices.Clone(tc.heldCPUs)}
			}
			tm, err := topologymanager.New(topologymanager.Options{Policy: topologymanager.PolicyNone,
				Providers: []topologymanager.HintProvider{devices, cpus}})
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, func(o *Options) { o.Parts.CPUs, o.Parts.Devices, o.Parts.Topology = cpus, devices, tm })
			e.k.SetNodeAdmitters(tc.node)
			e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{p}})
			created := strings.Join(describe(e.workers.take()), ",")
			st, rejected := e.k.status.GetPodStatus(p.UID)
			if tc.wantReason == "" {
				if created != "create:uid-p" || rejected {
					t.Fatalf("worker updates %q, status %+v: want the pod admitted", created, st)
				}
			} else if created != "" || !rejected || st.Phase != v1.PodFailed || st.Reason != tc.wantReason {
				t.Fatalf("worker updates %q, status %+v: want the pod rejected with %s", created, st, tc.wantReason)
			}
			if tc.wantMsg != "" && st.Message != tc.wantMsg {
				t.Errorf("message %q, want %q", st.Message, tc.wantMsg)
			}
			for _, c := range []struct {
				what      string
				got, want []string
			}{{"CPUs", cpus.of(p.UID), tc.wantCPUs}, {"devices", devices.of(p.UID), tc.wantDevices}} {
				slices.Sort(c.got)
				want := slices.Sorted(slices.Values(c.want))
				if !slices.Equal(c.got, want) {
					t.Errorf("%s held by %v after admission, want %v", c.what, c.got, want)
				}
			}
			if tc.wantNoCalls && cpus.calls+devices.calls != 0 {
				t.Errorf("%d allocations before the refusal", cpus.calls+devices.calls)
			}
		})
	}
}

// TestActivePods: the pod manager's ActivePods leaves out the pods the
// kubelet knows are done: terminated by the pod workers, or in a terminal
// phase and not being terminated.
func TestActivePods(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	running, finished, gone := staticPod("a", "uid-a"), staticPod("b", "uid-b", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded }), staticPod("c", "uid-c")
	e.k.handleSourceUpdate(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{running, finished, gone}})
	e.workers.terminated = map[k8stypes.UID]bool{"uid-c": true}
	if got := uids(e.k.pods.ActivePods()); !slices.Equal(got, []string{"uid-a"}) {
		t.Errorf("ActivePods = %v, want uid-a only", got)
	}
}
