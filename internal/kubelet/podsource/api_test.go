package podsource

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

const apiNode = "node-a"

// fakeAPI is client-go's fake clientset with hooks on pod lists and watches. The fake has
// no resource versions, so a watch does not replay what happened since the list: tests
// change pods only after watchStarted fired.
type fakeAPI struct {
	client       *fake.Clientset
	watchStarted chan struct{}
	down         atomic.Bool  // lists fail, as with the API server gone
	lists        atomic.Int32 // successful lists

	mu      sync.Mutex
	watcher watch.Interface // the current pod watch
}

func newFakeAPI(objs ...runtime.Object) *fakeAPI {
	f := &fakeAPI{client: fake.NewClientset(objs...), watchStarted: make(chan struct{}, 16)}
	f.client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if f.down.Load() {
			return true, nil, errors.New("connection refused")
		}
		f.lists.Add(1)
		return false, nil, nil // the default tracker reactor answers
	})
	f.client.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := f.client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		f.mu.Lock()
		f.watcher = w
		f.mu.Unlock()
		select {
		case f.watchStarted <- struct{}{}:
		default:
		}
		return true, w, nil
	})
	return f
}

// breakWatch ends the current watch, which makes the reflector relist.
func (f *fakeAPI) breakWatch() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.watcher != nil {
		f.watcher.Stop()
	}
}

func (f *fakeAPI) waitWatch(t *testing.T) {
	t.Helper()
	select {
	case <-f.watchStarted:
	case <-time.After(updateWait):
		t.Fatal("the reflector did not start a watch")
	}
}

// startAPISource runs only the API source of a new Source on f until the test ends.
func startAPISource(t *testing.T, f *fakeAPI, nodeSynced func() bool) *Source {
	t.Helper()
	s, err := New(Options{NodeName: apiNode, Client: f.client, NodeSynced: nodeSynced, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if s.SeenAllSources() {
		t.Fatal("SeenAllSources before the first list")
	}
	a := newAPISource(s)
	a.backoff = &wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1000, Cap: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(updateWait):
			t.Error("the API source did not stop when its context ended")
		}
	})
	return s
}

// nextAPIUpdate returns the next update, which must be a SET from the API source.
func nextAPIUpdate(t *testing.T, s *Source) kubecontainer.PodUpdate {
	t.Helper()
	u := nextUpdate(t, s)
	if u.Source != kubecontainer.APISource {
		t.Fatalf("update from %q, want %q", u.Source, kubecontainer.APISource)
	}
	return u
}

func podKeys(pods []*v1.Pod) []string {
	keys := make([]string, 0, len(pods))
	for _, p := range pods {
		keys = append(keys, p.Namespace+"/"+p.Name)
	}
	return keys
}

func apiPod(ns, name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: k8stypes.UID("uid-" + ns + "-" + name)},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "pause"}}},
	}
}

func TestAPISourceFirstList(t *testing.T) {
	t.Parallel()
	mirror := apiPod("kube-system", "etcd-"+apiNode, apiNode)
	mirror.Annotations = map[string]string{kubecontainer.ConfigMirrorAnnotationKey: "hash-1", kubecontainer.ConfigHashAnnotationKey: "hash-1"}
	mirror.Status.Phase = v1.PodRunning
	tests := []struct {
		desc string
		objs []*v1.Pod
		want []string
	}{
		{desc: "no pods: an empty first set", want: []string{}},
		{desc: "only this node's pods, sorted", objs: []*v1.Pod{
			apiPod("default", "web", apiNode), apiPod("default", "other", "node-b"), apiPod("app", "db", apiNode),
		}, want: []string{"app/db", "default/web"}},
		{desc: "mirror pods included", objs: []*v1.Pod{mirror}, want: []string{"kube-system/etcd-" + apiNode}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			objs := make([]runtime.Object, len(tc.objs))
			byUID := map[k8stypes.UID]*v1.Pod{}
			for i, p := range tc.objs {
				objs[i] = p.DeepCopy()
				byUID[p.UID] = p
			}
			f := newFakeAPI(objs...)
			s := startAPISource(t, f, nil)
			u := nextAPIUpdate(t, s)
			if got := podKeys(u.Pods); !slices.Equal(got, tc.want) {
				t.Fatalf("pods %v, want %v", got, tc.want)
			}
			if !s.SeenAllSources() {
				t.Error("SeenAllSources false after the first list")
			}
			for _, p := range u.Pods {
				checkAPIPod(t, f, p, byUID[p.UID])
			}
		})
	}
}

// checkAPIPod checks that got is the API pod want plus the source annotation, and that
// the object in the API was not touched.
func checkAPIPod(t *testing.T, f *fakeAPI, got, want *v1.Pod) {
	t.Helper()
	if want == nil {
		t.Fatalf("pod %s/%s has an unknown UID %q", got.Namespace, got.Name, got.UID)
	}
	if src := got.Annotations[kubecontainer.ConfigSourceAnnotationKey]; src != kubecontainer.APISource {
		t.Errorf("%s: config.source %q, want %q", got.Name, src, kubecontainer.APISource)
	}
	wantCopy := want.DeepCopy()
	if wantCopy.Annotations == nil {
		wantCopy.Annotations = map[string]string{}
	}
	wantCopy.Annotations[kubecontainer.ConfigSourceAnnotationKey] = kubecontainer.APISource
	if got.Name != want.Name || got.Spec.NodeName != want.Spec.NodeName || got.Status.Phase != want.Status.Phase ||
		len(got.Annotations) != len(wantCopy.Annotations) {
		t.Errorf("pod %+v, want %+v", got.ObjectMeta, wantCopy.ObjectMeta)
	}
	for k, v := range wantCopy.Annotations {
		if got.Annotations[k] != v {
			t.Errorf("%s: annotation %s=%q, want %q", got.Name, k, got.Annotations[k], v)
		}
	}
	stored, err := f.client.CoreV1().Pods(got.Namespace).Get(context.Background(), got.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", got.Name, err)
	}
	if _, ok := stored.Annotations[kubecontainer.ConfigSourceAnnotationKey]; ok {
		t.Errorf("%s: the API object was annotated", got.Name)
	}
}

func TestAPISourceChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFakeAPI()
	s := startAPISource(t, f, nil)
	if u := nextAPIUpdate(t, s); len(u.Pods) != 0 {
		t.Fatalf("first set %v, want empty", podKeys(u.Pods))
	}
	f.waitWatch(t)
	pods := f.client.CoreV1().Pods("default")

	created, err := pods.Create(ctx, apiPod("default", "web", apiNode), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := nextAPIUpdate(t, s); !slices.Equal(podKeys(u.Pods), []string{"default/web"}) || u.Pods[0].UID != created.UID {
		t.Fatalf("after create: %v", podKeys(u.Pods))
	}

	deleting := created.DeepCopy()
	now := metav1.Now()
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, new(int64(30))
	if _, err := pods.Update(ctx, deleting, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u := nextAPIUpdate(t, s)
	if len(u.Pods) != 1 || u.Pods[0].DeletionTimestamp == nil || *u.Pods[0].DeletionGracePeriodSeconds != 30 {
		t.Fatalf("after graceful delete: %+v", u.Pods)
	}

	// The fake ignores the field selector: the source itself must drop other nodes' pods.
	if _, err := pods.Create(ctx, apiPod("default", "elsewhere", "node-b"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	noUpdate(t, s, 200*time.Millisecond)

	if err := pods.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := nextAPIUpdate(t, s); len(u.Pods) != 0 {
		t.Fatalf("after delete: %v, want none", podKeys(u.Pods))
	}
}

// TestAPISourceRelist breaks the watch while lists fail (the API server is gone), changes
// the pods meanwhile, then lets the relist succeed: no set is sent during the outage, the
// next one has every pod, and a relist that finds the same pods sends nothing.
func TestAPISourceRelist(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFakeAPI(apiPod("default", "a", apiNode))
	s := startAPISource(t, f, nil)
	if u := nextAPIUpdate(t, s); !slices.Equal(podKeys(u.Pods), []string{"default/a"}) {
		t.Fatalf("first set %v", podKeys(u.Pods))
	}
	f.waitWatch(t)

	f.down.Store(true)
	f.breakWatch()
	if err := f.client.Tracker().Add(apiPod("default", "b", apiNode)); err != nil {
		t.Fatal(err)
	}
	noUpdate(t, s, 300*time.Millisecond)

	lists := f.lists.Load()
	f.down.Store(false)
	if u := nextAPIUpdate(t, s); !slices.Equal(podKeys(u.Pods), []string{"default/a", "default/b"}) {
		t.Fatalf("after the relist: %v", podKeys(u.Pods))
	}
	if f.lists.Load() == lists {
		t.Fatal("the set after the outage did not come from a relist")
	}
	f.waitWatch(t)

	lists = f.lists.Load()
	f.breakWatch()
	f.waitWatch(t)
	if f.lists.Load() == lists {
		t.Fatal("no relist after the watch ended")
	}
	noUpdate(t, s, 200*time.Millisecond)

	if err := f.client.CoreV1().Pods("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := nextAPIUpdate(t, s); !slices.Equal(podKeys(u.Pods), []string{"default/b"}) {
		t.Fatalf("after delete: %v", podKeys(u.Pods))
	}
}

func TestAPISourceWaitsForNode(t *testing.T) {
	t.Parallel()
	var synced atomic.Bool
	f := newFakeAPI(apiPod("default", "a", apiNode))
	s := startAPISource(t, f, synced.Load)
	noUpdate(t, s, 300*time.Millisecond)
	if f.lists.Load() != 0 {
		t.Fatal("listed pods before the node synced")
	}
	synced.Store(true)
	select {
	case u := <-s.Updates():
		if !slices.Equal(podKeys(u.Pods), []string{"default/a"}) {
			t.Fatalf("pods %v", podKeys(u.Pods))
		}
	case <-time.After(nodeSyncPeriod + updateWait):
		t.Fatal("no update after the node synced")
	}
}

func TestSamePods(t *testing.T) {
	t.Parallel()
	a, b := apiPod("default", "a", apiNode), apiPod("default", "b", apiNode)
	newer := a.DeepCopy()
	newer.ResourceVersion = "2"
	tests := []struct {
		desc string
		x, y []*v1.Pod
		want bool
	}{
		{desc: "both empty", want: true},
		{desc: "same objects", x: []*v1.Pod{a, b}, y: []*v1.Pod{a, b}, want: true},
		{desc: "equal copies (relist)", x: []*v1.Pod{a, b}, y: []*v1.Pod{a.DeepCopy(), b.DeepCopy()}, want: true},
		{desc: "changed pod", x: []*v1.Pod{a}, y: []*v1.Pod{newer}},
		{desc: "pod added", x: []*v1.Pod{a}, y: []*v1.Pod{a, b}},
		{desc: "pod removed", x: []*v1.Pod{a, b}, y: []*v1.Pod{}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			t.Parallel()
			if got := samePods(tc.x, tc.y); got != tc.want {
				t.Errorf("samePods = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestAPISourceReusesUnchangedCopies: a pod the API did not change is sent as
// the same copy in the next set, so consumers can skip it by pointer.
func TestAPISourceReusesUnchangedCopies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFakeAPI(apiPod("default", "a", apiNode))
	s := startAPISource(t, f, nil)
	first := nextAPIUpdate(t, s)
	if len(first.Pods) != 1 {
		t.Fatalf("first set %v, want default/a", podKeys(first.Pods))
	}
	f.waitWatch(t)
	if _, err := f.client.CoreV1().Pods("default").Create(ctx, apiPod("default", "b", apiNode), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	next := nextAPIUpdate(t, s)
	if !slices.Equal(podKeys(next.Pods), []string{"default/a", "default/b"}) {
		t.Fatalf("second set %v", podKeys(next.Pods))
	}
	if next.Pods[0] != first.Pods[0] {
		t.Error("the unchanged pod default/a was copied again")
	}
	if next.Pods[1].Annotations[kubecontainer.ConfigSourceAnnotationKey] != kubecontainer.APISource {
		t.Errorf("new pod annotations %v", next.Pods[1].Annotations)
	}
}
