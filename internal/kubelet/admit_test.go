package kubelet

import (
	"errors"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/admission"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// heldAllocations is a fake CPU manager and device allocator that records
// which containers hold something; fail makes Allocate refuse a container.
type heldAllocations struct {
	mu   sync.Mutex
	held map[k8stypes.UID][]string // pod -> containers
	fail string                    // container name Allocate refuses
}

func (h *heldAllocations) allocate(pod *v1.Pod, c *v1.Container) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.Name == h.fail {
		return errors.New("no more of it")
	}
	if h.held == nil {
		h.held = map[k8stypes.UID][]string{}
	}
	h.held[pod.UID] = append(h.held[pod.UID], c.Name)
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
	return h.held[uid]
}

type fakeCPUs struct{ heldAllocations }

func (f *fakeCPUs) Allocate(pod *v1.Pod, c *v1.Container) error { return f.allocate(pod, c) }
func (f *fakeCPUs) RemovePod(uid string) error                  { return f.removePod(uid) }

type fakeDevices struct{ heldAllocations }

func (f *fakeDevices) Allocate(pod *v1.Pod, c *v1.Container, _ bool) error { return f.allocate(pod, c) }
func (f *fakeDevices) RemovePod(uid string) error                          { return f.removePod(uid) }

// refuse is an admit handler that refuses every pod.
type refuse struct{ reason string }

func (r refuse) Admit(*v1.Pod) (string, string, bool) {
	return r.reason, "refused by " + r.reason, false
}

// TestAdmissionReleasesAllocations: a pod that got CPUs and devices and is
// then rejected by a later handler holds neither afterwards; a pod a handler
// refuses before the allocators ran gets nothing; an admitted pod keeps what
// it got.
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
	for _, tc := range []struct {
		desc       string
		mod        func(o *Options)
		windows    bool // the predicates refuse it (PodOSNotSupported)
		cpuFail    string
		deviceFail string
		wantReason string // "" admitted
		wantHeld   []string
	}{
		{desc: "admitted: keeps its CPUs and devices", wantHeld: []string{"init", "c", "second"}},
		{desc: "the node shutdown refuses it last", mod: func(o *Options) { o.Parts.Shutdown = refuse{"Terminated"} }, wantReason: "Terminated"},
		{desc: "the predicates refuse it", windows: true, wantReason: admission.ReasonOSNotSupported},
		{desc: "its second container gets no device", deviceFail: "second", wantReason: "UnexpectedAdmissionError"},
		{desc: "its second container gets no CPU", cpuFail: "second", wantReason: "UnexpectedAdmissionError"},
		{desc: "node pressure refuses it before any allocation", mod: func(o *Options) { o.Parts.Pressure = refuse{"Evicted"} }, wantReason: "Evicted"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			cpus := &fakeCPUs{heldAllocations{fail: tc.cpuFail}}
			devices := &fakeDevices{heldAllocations{fail: tc.deviceFail}}
			e := newEnv(t, func(o *Options) {
				o.Parts.CPUs, o.Parts.Devices = cpus, devices
				if tc.mod != nil {
					tc.mod(o)
				}
			})
			p := pod("uid-p", tc.windows)
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
			for what, got := range map[string][]string{"CPUs": cpus.of(p.UID), "devices": devices.of(p.UID)} {
				if strings.Join(got, ",") != strings.Join(tc.wantHeld, ",") {
					t.Errorf("%s held by %v after admission, want %v", what, got, tc.wantHeld)
				}
			}
		})
	}
}
