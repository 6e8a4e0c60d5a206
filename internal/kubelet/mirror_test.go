package kubelet

import (
	"context"
	"slices"
	"sync"
	"testing"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podmanager"
)

type fakeMirrors struct {
	mu      sync.Mutex
	created []string
	deleted []string
}

func (f *fakeMirrors) CreateMirrorPod(_ context.Context, static *v1.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created = append(f.created, static.Namespace+"/"+static.Name)
	return nil
}

func (f *fakeMirrors) DeleteMirrorPod(_ context.Context, namespace, name string, uid *k8stypes.UID) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, namespace+"/"+name+"@"+string(*uid))
	return true, nil
}

func mirrorOf(static *v1.Pod, uid, hash string, mods ...func(*v1.Pod)) *v1.Pod {
	m := static.DeepCopy()
	m.UID = k8stypes.UID(uid)
	m.Annotations = map[string]string{kubecontainer.ConfigSourceAnnotationKey: kubecontainer.APISource, kubecontainer.ConfigMirrorAnnotationKey: hash}
	for _, mod := range mods {
		mod(m)
	}
	return m
}

func TestPodStoreKeepsMirrorsApart(t *testing.T) {
	static := staticPod("web", "uid-static", func(p *v1.Pod) { p.Annotations[kubecontainer.ConfigHashAnnotationKey] = "uid-static" })
	api := staticPod("api-pod", "uid-api", func(p *v1.Pod) { p.Annotations[kubecontainer.ConfigSourceAnnotationKey] = kubecontainer.APISource })
	mirror := mirrorOf(static, "uid-mirror", "uid-static")
	s := podmanager.New()
	s.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{static}})
	ch := s.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.APISource, Pods: []*v1.Pod{api, mirror}})
	if got := uids(ch.Adds); !slices.Equal(got, []string{"uid-api"}) {
		t.Fatalf("adds = %v, want only the API pod", got)
	}
	if !slices.Equal(ch.Mirrors, []string{"default/web"}) {
		t.Fatalf("changed mirrors = %v, want default/web", ch.Mirrors)
	}
	if ch = s.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.APISource, Pods: []*v1.Pod{api, mirror}}); len(ch.Mirrors) != 0 {
		t.Fatalf("an unchanged mirror reported as changed: %v", ch.Mirrors)
	}
	if got := uids(s.All()); !slices.Equal(got, []string{"uid-api", "uid-static"}) {
		t.Fatalf("desired pods = %v", got)
	}
	if m, ok := s.Mirror("default", "web"); !ok || m.UID != "uid-mirror" {
		t.Fatalf("mirror lookup = %v %v", m, ok)
	}
	ch = s.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.APISource, Pods: []*v1.Pod{api}})
	if len(ch.Removes) != 0 {
		t.Fatalf("a mirror leaving the API removed desired pods: %v", uids(ch.Removes))
	}
	if !slices.Equal(ch.Mirrors, []string{"default/web"}) {
		t.Fatalf("a removed mirror is not reported: %v", ch.Mirrors)
	}
	if _, ok := s.Mirror("default", "web"); ok {
		t.Fatal("the mirror is still known after the API's SET without it")
	}
}

func TestMirrorKeeper(t *testing.T) {
	static := staticPod("web", "uid-static", func(p *v1.Pod) { p.Annotations[kubecontainer.ConfigHashAnnotationKey] = "uid-static" })
	now := metav1.Now()
	for _, tc := range []struct {
		desc                   string
		mirror                 *v1.Pod
		wantCreate, wantDelete []string
	}{
		{desc: "missing mirror is created", wantCreate: []string{"default/web"}},
		{desc: "current mirror is kept", mirror: mirrorOf(static, "m1", "uid-static")},
		{desc: "outdated mirror is replaced", mirror: mirrorOf(static, "m1", "old-hash"),
			wantCreate: []string{"default/web"}, wantDelete: []string{"default/web@m1"}},
		{desc: "deleting mirror is replaced", mirror: mirrorOf(static, "m1", "uid-static", func(p *v1.Pod) { p.DeletionTimestamp = &now }),
			wantCreate: []string{"default/web"}, wantDelete: []string{"default/web@m1"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			store := podmanager.New()
			store.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{static}})
			if tc.mirror != nil {
				store.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.APISource, Pods: []*v1.Pod{tc.mirror}})
			}
			fake := &fakeMirrors{}
			k := &mirrorKeeper{client: fake, pods: store, logger: zap.NewNop()}
			k.sync(context.Background(), static)
			if !slices.Equal(fake.created, tc.wantCreate) || !slices.Equal(fake.deleted, tc.wantDelete) {
				t.Fatalf("created %v deleted %v, want %v %v", fake.created, fake.deleted, tc.wantCreate, tc.wantDelete)
			}
		})
	}
}

func TestMirrorKeeperCleanup(t *testing.T) {
	gone := staticPod("gone", "uid-gone", func(p *v1.Pod) { p.Annotations[kubecontainer.ConfigHashAnnotationKey] = "uid-gone" })
	kept := staticPod("kept", "uid-kept", func(p *v1.Pod) { p.Annotations[kubecontainer.ConfigHashAnnotationKey] = "uid-kept" })
	stopping := staticPod("stopping", "uid-stopping")
	store := podmanager.New()
	store.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.FileSource, Pods: []*v1.Pod{kept}})
	store.Apply(kubecontainer.PodUpdate{Op: kubecontainer.SET, Source: kubecontainer.APISource, Pods: []*v1.Pod{
		mirrorOf(gone, "m-gone", "uid-gone"), mirrorOf(kept, "m-kept", "uid-kept"), mirrorOf(stopping, "m-stopping", "uid-stopping"),
	}})
	fake := &fakeMirrors{}
	k := &mirrorKeeper{client: fake, pods: store, logger: zap.NewNop()}
	k.cleanup(context.Background(), func(_, name string) bool { return name == "stopping" })
	if !slices.Equal(fake.deleted, []string{"default/gone@m-gone"}) {
		t.Fatalf("deleted %v, want only the orphan whose pod stopped", fake.deleted)
	}
}
