package eviction

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// sidecar adds a container "side" with an ephemeral-storage limit.
func sidecar(limit string) podOpt {
	return func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "side",
			Resources: v1.ResourceRequirements{Limits: list("ephemeral-storage", limit)}})
	}
}

// withTotal sets the pod's total ephemeral storage use.
func withTotal(s statsapi.PodStats, used int64) statsapi.PodStats {
	s.EphemeralStorage = &statsapi.FsStats{UsedBytes: u64(used)}
	return s
}

func TestManagerLocalStorage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc       string
		dedicated  bool
		pod        *v1.Pod
		stats      func(*v1.Pod) statsapi.PodStats
		wantMsg    string // "" = not evicted
		wantSignal string
	}{
		{
			desc:    "emptyDir over its size limit",
			pod:     newPod("p", volumes(emptyDir("cache", "", "1Mi"))),
			stats:   func(p *v1.Pod) statsapi.PodStats { return podDisk(p, 0, 0, "cache", 2*mi) },
			wantMsg: "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". ", wantSignal: "emptydirfs.limit",
		},
		{
			desc:  "emptyDir at its size limit",
			pod:   newPod("p", volumes(emptyDir("cache", "", "1Mi"))),
			stats: func(p *v1.Pod) statsapi.PodStats { return podDisk(p, 0, 0, "cache", mi) },
		},
		{
			desc:    "memory emptyDir over its size limit (upstream's default)",
			pod:     newPod("p", volumes(emptyDir("shm", v1.StorageMediumMemory, "64Mi"))),
			stats:   func(p *v1.Pod) statsapi.PodStats { return podDisk(p, 0, 0, "shm", 65*mi) },
			wantMsg: "Usage of EmptyDir volume \"shm\" exceeds the limit \"64Mi\". ", wantSignal: "emptydirfs.limit",
		},
		{
			desc:  "emptyDir without stats",
			pod:   newPod("p", volumes(emptyDir("cache", "", "1Mi"))),
			stats: func(p *v1.Pod) statsapi.PodStats { return podDisk(p, 0, 0) },
		},
		{
			desc:    "pod over its total ephemeral-storage limit",
			pod:     newPod("p", limits("ephemeral-storage", "1Gi"), sidecar("1Gi")),
			stats:   func(p *v1.Pod) statsapi.PodStats { return withTotal(podDisk(p, 0, 0), 2*gi+1) },
			wantMsg: "Pod ephemeral local storage usage exceeds the total limit of containers 2Gi. ", wantSignal: "ephemeralpodfs.limit",
		},
		{
			desc:    "emptyDir checked before the pod total",
			pod:     newPod("p", limits("ephemeral-storage", "1Gi"), volumes(emptyDir("cache", "", "1Mi"))),
			stats:   func(p *v1.Pod) statsapi.PodStats { return withTotal(podDisk(p, 0, 0, "cache", 2*mi), 2*gi) },
			wantMsg: "Usage of EmptyDir volume \"cache\" exceeds the limit \"1Mi\". ", wantSignal: "emptydirfs.limit",
		},
		{
			desc:    "container over its limit, rootfs counted on one filesystem",
			pod:     newPod("p", limits("ephemeral-storage", "1Gi"), sidecar("10Gi")),
			stats:   func(p *v1.Pod) statsapi.PodStats { return withTotal(podDisk(p, gi, 1), 2*gi) },
			wantMsg: "Container app exceeded its local ephemeral storage limit \"1Gi\". ", wantSignal: "ephemeralcontainerfs.limit",
		},
		{
			desc:      "container rootfs not counted with a dedicated imagefs",
			dedicated: true,
			pod:       newPod("p", limits("ephemeral-storage", "1Gi"), sidecar("10Gi")),
			stats:     func(p *v1.Pod) statsapi.PodStats { return withTotal(podDisk(p, 5*gi, 1), 2*gi) },
		},
		{
			desc:      "container logs counted with a dedicated imagefs",
			dedicated: true,
			pod:       newPod("p", limits("ephemeral-storage", "1Gi"), sidecar("10Gi")),
			stats:     func(p *v1.Pod) statsapi.PodStats { return withTotal(podDisk(p, 0, gi+1), 2*gi) },
			wantMsg:   "Container app exceeded its local ephemeral storage limit \"1Gi\". ", wantSignal: "ephemeralcontainerfs.limit",
		},
		{
			desc: "sidecar init container over its limit",
			pod: newPod("p", func(p *v1.Pod) {
				always := v1.ContainerRestartPolicyAlways
				p.Spec.InitContainers = []v1.Container{{Name: "proxy", RestartPolicy: &always,
					Resources: v1.ResourceRequirements{Limits: list("ephemeral-storage", "100Mi")}}}
				p.Spec.Containers[0].Resources.Limits = list("ephemeral-storage", "10Gi")
			}),
			stats: func(p *v1.Pod) statsapi.PodStats {
				s := withTotal(podDisk(p, 0, 0), 200*mi)
				s.Containers = append(s.Containers, statsapi.ContainerStats{Name: "proxy",
					Rootfs: &statsapi.FsStats{UsedBytes: u64(200 * mi)}, Logs: &statsapi.FsStats{UsedBytes: u64(0)}})
				return s
			},
			wantMsg: "Container proxy exceeded its local ephemeral storage limit \"100Mi\". ", wantSignal: "ephemeralcontainerfs.limit",
		},
		{
			desc:  "under every limit",
			pod:   newPod("p", limits("ephemeral-storage", "1Gi"), volumes(emptyDir("cache", "", "1Gi"))),
			stats: func(p *v1.Pod) statsapi.PodStats { return withTotal(podDisk(p, mi, mi, "cache", mi), 3*mi) },
		},
		{
			desc:  "critical pods are not evicted",
			pod:   newPod("p", priorityOf(2000000000), volumes(emptyDir("cache", "", "1Mi"))),
			stats: func(p *v1.Pod) statsapi.PodStats { return podDisk(p, 0, 0, "cache", 2*mi) },
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{LocalStorageCapacityIsolation: true}, tc.dedicated, tc.pod)
			e.memSample(4*gi, tc.stats(tc.pod))
			got := e.sync()
			if tc.wantMsg == "" {
				if len(got) != 0 || len(e.killer.calls) != 0 {
					t.Fatalf("evicted %q", got)
				}
				return
			}
			if !slices.Equal(got, []string{"p"}) || len(e.killer.calls) != 1 {
				t.Fatalf("evicted %q, want [p]", got)
			}
			call := e.killer.calls[0]
			if call.grace != 1 || call.status.Phase != v1.PodFailed || call.status.Reason != "Evicted" || call.status.Message != tc.wantMsg {
				t.Errorf("KillPod(grace %d) status = %s/%s/%q, want 1, Failed/Evicted/%q",
					call.grace, call.status.Phase, call.status.Reason, call.status.Message, tc.wantMsg)
			}
			if len(call.status.Conditions) != 0 {
				t.Errorf("conditions = %+v, want none", call.status.Conditions)
			}
			if len(e.rec.pods()) != 1 || e.rec.pods()[0].reason != "Evicted" || e.rec.pods()[0].message != tc.wantMsg {
				t.Errorf("pod events = %+v", e.rec.pods())
			}
			if len(e.rec.node()) != 0 {
				t.Errorf("node events = %q, want none", e.rec.node())
			}
			if n := e.evictions(t, tc.wantSignal); n != 1 {
				t.Errorf("kubelet_evictions{%s} = %v, want 1", tc.wantSignal, n)
			}
			if e.m.IsUnderDiskPressure() {
				t.Error("a local storage eviction set DiskPressure")
			}
		})
	}
}

func TestManagerLocalStorageEvictsEveryViolator(t *testing.T) {
	t.Parallel()
	a := newPod("a", volumes(emptyDir("cache", "", "1Mi")))
	b := newPod("b", limits("ephemeral-storage", "1Mi"))
	fine := newPod("fine", limits("ephemeral-storage", "1Gi"))
	e := newEnv(t, Options{LocalStorageCapacityIsolation: true, Thresholds: hardMemory(t, "1Gi")}, false, a, fine, b)
	// Memory pressure too: the local storage evictions take the pass.
	e.memSample(100*mi, podDisk(a, 0, 0, "cache", 2*mi), withTotal(podDisk(b, 2*mi, 0), 2*mi), withTotal(podDisk(fine, mi, 0), mi))
	if got := e.sync(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("evicted %q, want [a b]", got)
	}
	if len(e.rec.node()) != 0 {
		t.Errorf("node events %q: memory reclaim ran in a local storage pass", e.rec.node())
	}
}

func TestManagerSummaryOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	plain := newPod("plain", requests("memory", "1Gi"), volumes(emptyDir("cache", "", "")))
	limited := newPod("limited", volumes(emptyDir("cache", "", "1Gi")))
	for _, tc := range []struct {
		desc        string
		isolation   bool
		pods        []*v1.Pod
		avail       int64
		wantSummary int
	}{
		{desc: "no threshold met, no pod limits", isolation: true, pods: []*v1.Pod{plain}, avail: 4 * gi},
		{desc: "no threshold met, limits not enforced", pods: []*v1.Pod{plain, limited}, avail: 4 * gi},
		{desc: "a pod with a limit", isolation: true, pods: []*v1.Pod{plain, limited}, avail: 4 * gi, wantSummary: 3},
		{desc: "a threshold met", isolation: true, pods: []*v1.Pod{plain}, avail: 100 * mi, wantSummary: 3},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, Options{LocalStorageCapacityIsolation: tc.isolation, Thresholds: hardMemory(t, "1Gi")}, false, tc.pods...)
			for range 3 {
				e.memSample(tc.avail)
				e.sync()
				e.clock.Step(10 * time.Second)
			}
			if node, summary := e.stats.calls(); node != 3 || summary != tc.wantSummary {
				t.Errorf("NodeStats calls = %d, Summary calls = %d; want 3, %d", node, summary, tc.wantSummary)
			}
		})
	}
}

func TestHasLocalStorageLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		desc string
		pod  *v1.Pod
		want bool
	}{
		{desc: "none", pod: newPod("p", volumes(emptyDir("c", "", "")), limits("memory", "1Gi"))},
		{desc: "emptyDir size limit", pod: newPod("p", volumes(emptyDir("c", "", "1Mi"))), want: true},
		{desc: "zero emptyDir size limit", pod: newPod("p", volumes(emptyDir("c", "", "0")))},
		{desc: "container limit", pod: newPod("p", limits("ephemeral-storage", "1Gi")), want: true},
		{desc: "init container limit", pod: newPod("p", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "i", Resources: v1.ResourceRequirements{Limits: list("ephemeral-storage", "1Gi")}}}
		}), want: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := hasLocalStorageLimit(tc.pod); got != tc.want {
				t.Errorf("hasLocalStorageLimit = %v, want %v", got, tc.want)
			}
		})
	}
}
