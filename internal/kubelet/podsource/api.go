package podsource

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// nodeSyncPeriod is how often the API source checks Options.NodeSynced before it starts
// watching (upstream WaitForAPIServerSyncPeriod).
const nodeSyncPeriod = time.Second

// apiSource watches the pods bound to this node through the API server and sends their
// full set as one SET on every change, as upstream pkg/kubelet/config/apiserver.go does.
//
// A reflector lists and watches pods with the field selector spec.nodeName=<node> into a
// store that wakes the sender after each change. The sender coalesces bursts, so it
// always sends the newest full set and never blocks the reflector. When the API server
// goes away, list and watch fail and nothing is sent; when it is back, the reflector
// relists and replaces the store in one step, so no empty or partial set is ever sent in
// between, and a relist that finds what was already sent sends nothing.
type apiSource struct {
	src        *Source
	client     kubernetes.Interface
	nodeName   string
	nodeSynced func() bool
	logger     *zap.Logger
	backoff    *wait.Backoff // reflector retry backoff; nil = client-go's default (0.8s doubling to 30s)

	wake chan struct{} // capacity 1: the store changed since the sender last looked

	mu      sync.Mutex
	listed  bool          // the first full list arrived
	current []interface{} // the store's objects after its last change
}

func newAPISource(s *Source) *apiSource {
	return &apiSource{
		src:        s,
		client:     s.opts.Client,
		nodeName:   s.opts.NodeName,
		nodeSynced: s.opts.NodeSynced,
		logger:     s.logger.With(zap.String("source", kubecontainer.APISource)),
		wake:       make(chan struct{}, 1),
	}
}

// run waits for the node (if asked to), then watches until ctx ends.
func (a *apiSource) run(ctx context.Context) {
	if !a.waitForNode(ctx) {
		return
	}
	a.logger.Info("Watching the API server for pods bound to this node", zap.String("node", a.nodeName))
	// The reflector logs through the logger in ctx (and ReflectorOptions.Logger).
	kl := zapr.NewLogger(a.logger.Named("reflector"))
	ctx = klog.NewContext(ctx, kl)
	r := cache.NewReflectorWithOptions(a.listWatch(), &v1.Pod{}, &notifyingStore{
		Store:   cache.NewStore(cache.DeletionHandlingMetaNamespaceKeyFunc),
		changed: a.changed,
	}, cache.ReflectorOptions{Name: "podsource-api", Logger: &kl, Backoff: a.backoff})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer logging.HandleCrash(a.logger, "pod source: api reflector")
		r.RunWithContext(ctx)
	})
	a.sendLoop(ctx)
	wg.Wait()
}

// waitForNode polls nodeSynced, as upstream waits for the node informer before watching
// pods (admission needs the Node object). It reports false when ctx ended first.
func (a *apiSource) waitForNode(ctx context.Context) bool {
	if a.nodeSynced == nil || a.nodeSynced() {
		return true
	}
	a.logger.Info("Waiting for the node to sync before watching pods")
	ticker := time.NewTicker(nodeSyncPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-ticker.C:
			if a.nodeSynced() {
				return true
			}
		}
	}
}

// listWatch lists and watches the pods of every namespace bound to this node. It tells
// the reflector whether the client can stream lists (client-go's fake cannot).
func (a *apiSource) listWatch() cache.ListerWatcher {
	selector := fields.OneTermEqualSelector("spec.nodeName", a.nodeName).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.FieldSelector = selector
			return a.client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.FieldSelector = selector
			return a.client.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, opts)
		},
	}
	return cache.ToListWatcherWithWatchListSemantics(lw, a.client)
}

// changed records the store's objects after a change and wakes the sender. full is true
// for a (re)list, which replaces the whole store.
func (a *apiSource) changed(objs []interface{}, full bool) {
	a.mu.Lock()
	if full && !a.listed {
		a.listed = true
		a.logger.Info("Listed the pods bound to this node", zap.Int("pods", len(objs)))
	}
	a.current = objs
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default: // already woken; the sender will read the newest objects
	}
}

// snapshot returns this node's pods from the last change, sorted by namespace/name and
// not copied, or false before the first full list. Pods bound elsewhere are dropped: the
// field selector already excludes them, but a client may ignore it (client-go's fake).
func (a *apiSource) snapshot() ([]*v1.Pod, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.listed {
		return nil, false
	}
	pods := make([]*v1.Pod, 0, len(a.current))
	for _, obj := range a.current {
		pod, ok := obj.(*v1.Pod)
		if !ok || pod.Spec.NodeName != a.nodeName {
			continue
		}
		pods = append(pods, pod)
	}
	sort.Slice(pods, func(i, j int) bool {
		if pods[i].Namespace != pods[j].Namespace {
			return pods[i].Namespace < pods[j].Namespace
		}
		return pods[i].Name < pods[j].Name
	})
	return pods, true
}

// sendLoop sends the newest full set after each change until ctx ends. The first set is
// sent even when empty; it marks the source seen.
func (a *apiSource) sendLoop(ctx context.Context) {
	var last []*v1.Pod
	sent := false
	// copies maps the store's objects of the last set sent to their annotated
	// copies: an unchanged pod is sent as the same copy, so the consumer sees
	// it unchanged without comparing or copying it again.
	copies := map[*v1.Pod]*v1.Pod{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.wake:
		}
		pods, ok := a.snapshot()
		if ok && a.src.opts.Watched != nil {
			a.src.opts.Watched.ObservedPodsOnWatch(pods, time.Now())
		}
		if !ok || (sent && samePods(last, pods)) {
			continue
		}
		out := make([]*v1.Pod, len(pods))
		next := make(map[*v1.Pod]*v1.Pod, len(pods))
		for i, pod := range pods {
			c, ok := copies[pod]
			if !ok {
				c = annotatedCopy(pod)
			}
			out[i], next[pod] = c, c
		}
		a.src.markSeen(kubecontainer.APISource)
		select {
		case a.src.updates <- kubecontainer.PodUpdate{Pods: out, Op: kubecontainer.SET, Source: kubecontainer.APISource}:
		case <-ctx.Done():
			return
		}
		last, sent, copies = pods, true, next
		a.logger.Debug("Sent pods", zap.Int("pods", len(out)))
	}
}

// annotatedCopy returns a deep copy of an API pod marked kubernetes.io/config.source=api.
// Everything else (UID, name, mirror annotation, status) is kept as the API has it.
func annotatedCopy(pod *v1.Pod) *v1.Pod {
	p := pod.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[kubecontainer.ConfigSourceAnnotationKey] = kubecontainer.APISource
	return p
}

// samePods reports whether two sorted pod lists hold the same objects. Objects in the
// store are never mutated, so pointer equality is a fast path; a relist brings new
// objects that are compared by content.
func samePods(a, b []*v1.Pod) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !apiequality.Semantic.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

// notifyingStore is the reflector's store: a plain cache.Store that reports its full
// contents after every change, like client-go's UndeltaStore, and tells a relist apart.
type notifyingStore struct {
	cache.Store
	changed func(objs []interface{}, full bool)
}

func (s *notifyingStore) Add(obj interface{}) error {
	if err := s.Store.Add(obj); err != nil {
		return err
	}
	s.changed(s.Store.List(), false)
	return nil
}

func (s *notifyingStore) Update(obj interface{}) error {
	if err := s.Store.Update(obj); err != nil {
		return err
	}
	s.changed(s.Store.List(), false)
	return nil
}

func (s *notifyingStore) Delete(obj interface{}) error {
	if err := s.Store.Delete(obj); err != nil {
		return err
	}
	s.changed(s.Store.List(), false)
	return nil
}

func (s *notifyingStore) Replace(list []interface{}, resourceVersion string) error {
	if err := s.Store.Replace(list, resourceVersion); err != nil {
		return err
	}
	s.changed(s.Store.List(), true)
	return nil
}
