package podmanager

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/podtest"
)

var (
	staticPod = podtest.StaticPod
	uids      = podtest.UIDs
)

func TestPodStoreApply(t *testing.T) {
	t.Parallel()
	a, b := staticPod("a", "uid-a"), staticPod("b", "uid-b")
	bImage := staticPod("b", "uid-b", func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx" })
	bSeen := staticPod("b", "uid-b", func(p *v1.Pod) { p.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey] = "later" })
	bNewUID := staticPod("b", "uid-b2", func(p *v1.Pod) { p.Spec.Containers[0].Image = "nginx" })
	bStatus := staticPod("b", "uid-b", func(p *v1.Pod) { p.Status.Phase = v1.PodRunning })
	bStatusAndImage := staticPod("b", "uid-b", func(p *v1.Pod) {
		p.Status.Phase = v1.PodRunning
		p.Spec.Containers[0].Image = "nginx"
	})
	fromHTTP := staticPod("h", "uid-h")
	for _, tc := range []struct {
		desc                   string
		first                  []kubecontainer.PodUpdate
		update                 kubecontainer.PodUpdate
		adds, updates, removes []string
		reconciles             []string
		all                    []string
	}{
		{
			desc:   "first SET adds everything",
			update: kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}},
			adds:   []string{"uid-a", "uid-b"}, all: []string{"uid-a", "uid-b"},
		},
		{
			desc:   "same SET again changes nothing",
			first:  []kubecontainer.PodUpdate{{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}}},
			update: kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}},
			all:    []string{"uid-a", "uid-b"},
		},
		{
			desc:    "a pod missing from the SET is removed",
			first:   []kubecontainer.PodUpdate{{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}}},
			update:  kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a}},
			removes: []string{"uid-b"}, all: []string{"uid-a"},
		},
		{
			desc:    "changed spec with the same UID is an update",
			first:   []kubecontainer.PodUpdate{{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}}},
			update:  kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, bImage}},
			updates: []string{"uid-b"}, all: []string{"uid-a", "uid-b"},
		},
		{
			desc:   "a new first-seen annotation alone is no update",
			first:  []kubecontainer.PodUpdate{{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}}},
			update: kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, bSeen}},
			all:    []string{"uid-a", "uid-b"},
		},
		{
			desc:       "a status-only change is a reconcile",
			first:      []kubecontainer.PodUpdate{{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}}},
			update:     kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, bStatus}},
			reconciles: []string{"uid-b"}, all: []string{"uid-a", "uid-b"},
		},
		{
			desc:    "a status change with a spec change is an update only",
			first:   []kubecontainer.PodUpdate{{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}}},
			update:  kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, bStatusAndImage}},
			updates: []string{"uid-b"}, all: []string{"uid-a", "uid-b"},
		},
		{
			desc:   "changed manifest with a new UID is remove plus add",
			first:  []kubecontainer.PodUpdate{{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}}},
			update: kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, bNewUID}},
			adds:   []string{"uid-b2"}, removes: []string{"uid-b"}, all: []string{"uid-a", "uid-b2"},
		},
		{
			desc:   "sources are diffed separately",
			first:  []kubecontainer.PodUpdate{{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a}}},
			update: kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.HTTPSource, Pods: []*v1.Pod{fromHTTP}},
			adds:   []string{"uid-h"}, all: []string{"uid-a", "uid-h"},
		},
		{
			desc:    "empty SET removes everything of the source",
			first:   []kubecontainer.PodUpdate{{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}}},
			update:  kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource},
			removes: []string{"uid-a", "uid-b"}, all: []string{},
		},
		{
			desc:    "ADD then REMOVE ops",
			first:   []kubecontainer.PodUpdate{{Op: kubecontainer.ADD, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a, b}}},
			update:  kubecontainer.PodUpdate{Op: kubecontainer.REMOVE, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a}},
			removes: []string{"uid-a"}, all: []string{"uid-b"},
		},
		{
			desc:    "UPDATE op with a change",
			first:   []kubecontainer.PodUpdate{{Op: kubecontainer.ADD, Source: kubecontainer.FileSource, Pods: []*v1.Pod{b}}},
			update:  kubecontainer.PodUpdate{Op: kubecontainer.UPDATE, Source: kubecontainer.FileSource, Pods: []*v1.Pod{bImage}},
			updates: []string{"uid-b"}, all: []string{"uid-b"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			s := New()
			for _, u := range tc.first {
				s.Apply(u)
			}
			ch := s.Apply(tc.update)
			for _, check := range []struct {
				name      string
				got, want []string
			}{
				{"adds", uids(ch.Adds), tc.adds},
				{"updates", uids(ch.Updates), tc.updates},
				{"removes", uids(ch.Removes), tc.removes},
				{"reconciles", uids(ch.Reconciles), tc.reconciles},
				{"all", uids(s.All()), tc.all},
			} {
				if !slices.Equal(check.got, check.want) {
					t.Errorf("%s = %v, want %v", check.name, check.got, check.want)
				}
			}
		})
	}
}

func TestPodStoreKeepsFirstSeenOnUpdate(t *testing.T) {
	t.Parallel()
	s := New()
	a := staticPod("a", "uid-a", func(p *v1.Pod) { p.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey] = "first" })
	s.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{a}})
	s.MarkAdmitted(a.UID)
	changed := staticPod("a", "uid-a", func(p *v1.Pod) {
		p.Annotations[kubecontainer.ConfigFirstSeenAnnotationKey] = "second"
		p.Labels = map[string]string{"x": "y"}
	})
	ch := s.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{changed}})
	if len(ch.Updates) != 1 || ch.Updates[0].Annotations[kubecontainer.ConfigFirstSeenAnnotationKey] != "first" {
		t.Fatalf("updates = %+v, want one keeping the first-seen time", ch.Updates)
	}
	if !s.IsAdmitted(a.UID) {
		t.Error("update forgot admission")
	}
	s.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource})
	if !s.IsAdmitted(a.UID) {
		t.Error("removed pod's admission forgotten before its removal was handled")
	}
	s.RetainAdmitted()
	if s.IsAdmitted(a.UID) {
		t.Error("removed pod still admitted after retainAdmitted")
	}
	if _, ok := s.Get(k8stypes.UID("uid-a")); ok {
		t.Error("removed pod still stored")
	}
}

func TestPodStoreStatusOnlyChange(t *testing.T) {
	t.Parallel()
	s := New()
	api := staticPod("a", "uid-a", func(p *v1.Pod) { p.Annotations[kubecontainer.ConfigSourceAnnotationKey] = kubecontainer.APISource })
	s.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.APISource, Pods: []*v1.Pod{api}})
	patched := api.DeepCopy()
	patched.Status.Conditions = []v1.PodCondition{{Type: "example.com/gate", Status: v1.ConditionTrue}}
	ch := s.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.APISource, Pods: []*v1.Pod{patched}})
	if len(ch.Adds)+len(ch.Updates)+len(ch.Removes) != 0 {
		t.Fatalf("a status-only change is reported as an add, update or remove: %+v", ch)
	}
	if len(ch.Reconciles) != 1 || ch.Reconciles[0].UID != "uid-a" {
		t.Fatalf("reconciles = %v, want the pod whose status changed", uids(ch.Reconciles))
	}
	got, ok := s.Get("uid-a")
	if !ok || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != "example.com/gate" {
		t.Fatalf("the stored pod does not carry the API's latest status: %+v", got)
	}
	if p, ok := s.ByFullName("default", "a"); !ok || p != got {
		t.Fatalf("byFullName = %v %v, want the stored pod", p, ok)
	}
}

// TestActivePods: every desired pod until the kubelet installs its test of a
// pod being active, then only those it passes, oldest first.
func TestActivePods(t *testing.T) {
	t.Parallel()
	m := New()
	old := staticPod("old", "uid-old", func(p *v1.Pod) { p.CreationTimestamp.Time = p.CreationTimestamp.Add(-time.Hour) })
	done := staticPod("done", "uid-done", func(p *v1.Pod) { p.Status.Phase = v1.PodSucceeded })
	m.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{staticPod("new", "uid-new"), done, old}})
	if got := m.ActivePods(); len(got) != 3 || got[0] != old {
		t.Fatalf("ActivePods before SetActive = %v, want all three, oldest first", uids(got))
	}
	m.SetActive(func(p *v1.Pod) bool { return p.Status.Phase != v1.PodSucceeded })
	if got := m.ActivePods(); len(got) != 2 || got[0].UID != "uid-old" || got[1].UID != "uid-new" {
		t.Errorf("ActivePods = %v, want uid-old then uid-new", uids(got))
	}
}
