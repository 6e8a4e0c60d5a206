package kubelet

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/prober"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

// fakeRuntime records the runtime manager calls.
type fakeRuntime struct {
	mu         sync.Mutex
	syncCalls  []syncCall
	killCalls  []killCall
	gcCalls    int
	syncResult kubecontainer.PodSyncResult
	killErr    error
	statuses   map[k8stypes.UID]*kubecontainer.PodStatus // GetPodStatus answers
	pods       []*kubecontainer.Pod                      // GetPods answer
	statusErr  error
	notReady   bool
}

type syncCall struct {
	pod     *v1.Pod
	status  *kubecontainer.PodStatus
	backOff *flowcontrol.Backoff
}

type killCall struct {
	pod     *v1.Pod
	running *kubecontainer.Pod
	grace   *int64
}

func (r *fakeRuntime) SyncPod(_ context.Context, pod *v1.Pod, st *kubecontainer.PodStatus, _ []v1.Secret, b *flowcontrol.Backoff) kubecontainer.PodSyncResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncCalls = append(r.syncCalls, syncCall{pod, st, b})
	return r.syncResult
}

func (r *fakeRuntime) KillPod(_ context.Context, pod *v1.Pod, running *kubecontainer.Pod, grace *int64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.killCalls = append(r.killCalls, killCall{pod, running, grace})
	return r.killErr
}

func (r *fakeRuntime) GetPodStatus(_ context.Context, uid k8stypes.UID, name, ns string) (*kubecontainer.PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.statuses[uid]; ok {
		return st, nil
	}
	return &kubecontainer.PodStatus{ID: uid, Name: name, Namespace: ns}, nil
}

func (r *fakeRuntime) GetPods(context.Context, bool) ([]*kubecontainer.Pod, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods, nil
}

func (r *fakeRuntime) GarbageCollect(context.Context, kuberuntime.GCPolicy, bool, bool, kuberuntime.PodStateProvider) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gcCalls++
	return nil
}

func (r *fakeRuntime) Status(context.Context) (*runtimeapi.RuntimeStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.statusErr != nil {
		return nil, r.statusErr
	}
	return &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: !r.notReady, Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"},
	}}, nil
}

func (r *fakeRuntime) syncs() []syncCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]syncCall{}, r.syncCalls...)
}

func (r *fakeRuntime) kills() []killCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]killCall{}, r.killCalls...)
}

// fakeSource is a pod source fed by the test.
type fakeSource struct {
	ch   chan kubecontainer.PodUpdate
	seen bool
}

func (s *fakeSource) Updates() <-chan kubecontainer.PodUpdate { return s.ch }
func (s *fakeSource) SeenAllSources() bool                    { return s.seen }

// fakePLEG delivers events the test sends.
type fakePLEG struct {
	ch      chan *pleg.PodLifecycleEvent
	healthy bool
	ran     chan struct{}
}

func (p *fakePLEG) Run(ctx context.Context) {
	if p.ran != nil {
		close(p.ran)
	}
	<-ctx.Done()
}
func (p *fakePLEG) Watch() <-chan *pleg.PodLifecycleEvent { return p.ch }
func (p *fakePLEG) Healthy() (bool, error) {
	if !p.healthy {
		return false, errors.New("not relisted")
	}
	return true, nil
}

// fakeProber records the prober calls; UpdatePodStatus marks running
// containers started and ready.
type fakeProber struct {
	mu                           sync.Mutex
	added, removed               []k8stypes.UID
	addCtx                       context.Context
	cleanup                      []map[k8stypes.UID]struct{}
	liveness, readiness, startup chan prober.Update
}

func newFakeProber() *fakeProber {
	return &fakeProber{liveness: make(chan prober.Update, 4), readiness: make(chan prober.Update, 4), startup: make(chan prober.Update, 4)}
}

func (p *fakeProber) AddPod(ctx context.Context, pod *v1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.added = append(p.added, pod.UID)
	p.addCtx = ctx
}

func (p *fakeProber) RemovePod(pod *v1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removed = append(p.removed, pod.UID)
}

func (p *fakeProber) CleanupPods(desired map[k8stypes.UID]struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanup = append(p.cleanup, desired)
}

func (p *fakeProber) UpdatePodStatus(_ k8stypes.UID, st *v1.PodStatus) {
	for i := range st.ContainerStatuses {
		c := &st.ContainerStatuses[i]
		running := c.State.Running != nil
		c.Started, c.Ready = &running, running
	}
	for i := range st.InitContainerStatuses {
		c := &st.InitContainerStatuses[i]
		c.Ready = c.State.Terminated != nil && c.State.Terminated.ExitCode == 0
	}
}

func (p *fakeProber) LivenessUpdates() <-chan prober.Update  { return p.liveness }
func (p *fakeProber) ReadinessUpdates() <-chan prober.Update { return p.readiness }
func (p *fakeProber) StartupUpdates() <-chan prober.Update   { return p.startup }

// fakeVolumes maps each pod volume to a directory under base.
type fakeVolumes struct {
	mu        sync.Mutex
	base      string
	mountErr  error
	mounted   []k8stypes.UID
	unmounted []k8stypes.UID
	cleanups  []map[k8stypes.UID]bool
	readOnly  map[string]bool
}

func (f *fakeVolumes) MountVolumes(_ context.Context, pod *v1.Pod) (map[string]volumes.VolumeInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.mountErr != nil {
		return nil, f.mountErr
	}
	f.mounted = append(f.mounted, pod.UID)
	out := map[string]volumes.VolumeInfo{}
	for _, v := range pod.Spec.Volumes {
		out[v.Name] = volumes.VolumeInfo{HostPath: f.base + "/" + v.Name, Managed: v.EmptyDir != nil, ReadOnly: f.readOnly[v.Name]}
	}
	return out, nil
}

func (f *fakeVolumes) UnmountVolumes(_ context.Context, uid k8stypes.UID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unmounted = append(f.unmounted, uid)
	return nil
}

func (f *fakeVolumes) CleanupOrphans(_ context.Context, active map[k8stypes.UID]bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, active)
	return nil
}

type fakeDNS struct{}

func (fakeDNS) GetPodDNS(*v1.Pod) (*runtimeapi.DNSConfig, error) {
	return &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}}, nil
}

// fakeWorkers records UpdatePod calls.
type fakeWorkers struct {
	mu         sync.Mutex
	updates    []podworkers.UpdatePodOptions
	known      map[k8stypes.UID]podworkers.PodWorkerSync
	terminated map[k8stypes.UID]bool
	stopped    bool
}

func (w *fakeWorkers) UpdatePod(o podworkers.UpdatePodOptions) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.updates = append(w.updates, o)
}

func (w *fakeWorkers) SyncKnownPods([]*v1.Pod) map[k8stypes.UID]podworkers.PodWorkerSync {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[k8stypes.UID]podworkers.PodWorkerSync{}
	for k, v := range w.known {
		out[k] = v
	}
	return out
}

func (w *fakeWorkers) IsPodTerminationRequested(k8stypes.UID) bool  { return false }
func (w *fakeWorkers) CouldHaveRunningContainers(k8stypes.UID) bool { return true }
func (w *fakeWorkers) ShouldPodContentBeRemoved(k8stypes.UID) bool  { return false }
func (w *fakeWorkers) ShouldPodRuntimeBeRemoved(k8stypes.UID) bool  { return false }
func (w *fakeWorkers) IsPodKnownTerminated(uid k8stypes.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.terminated[uid]
}

func (w *fakeWorkers) Stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
}

func (w *fakeWorkers) take() []podworkers.UpdatePodOptions {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.updates
	w.updates = nil
	return out
}

// env bundles a Kubelet built from fakes.
type env struct {
	k       *Kubelet
	runtime *fakeRuntime
	source  *fakeSource
	pleg    *fakePLEG
	prober  *fakeProber
	volumes *fakeVolumes
	workers *fakeWorkers
	events  *eventLog
	root    string
}

type eventLog struct {
	mu     sync.Mutex
	events []string // "type reason: message"
}

func (l *eventLog) record(_ *v1.Pod, eventType, reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, eventType+" "+reason+": "+message)
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string{}, l.events...)
}

func newEnv(t *testing.T, mods ...func(*Options)) *env {
	t.Helper()
	root := t.TempDir()
	e := &env{
		runtime: &fakeRuntime{statuses: map[k8stypes.UID]*kubecontainer.PodStatus{}},
		source:  &fakeSource{ch: make(chan kubecontainer.PodUpdate, 4), seen: true},
		pleg:    &fakePLEG{ch: make(chan *pleg.PodLifecycleEvent, 4), healthy: true},
		prober:  newFakeProber(),
		volumes: &fakeVolumes{base: t.TempDir()},
		workers: &fakeWorkers{},
		events:  &eventLog{},
		root:    root,
	}
	opts := Options{
		NodeName:      "node-1",
		NodeIP:        []byte{192, 168, 1, 10},
		RootDir:       root,
		NodeCapacity:  v1.ResourceList{},
		Runtime:       e.runtime,
		Sources:       e.source,
		PLEG:          e.pleg,
		Prober:        e.prober,
		Volumes:       e.volumes,
		DNS:           fakeDNS{},
		NewPodWorkers: func(podworkers.SyncFuncs) PodWorkers { return e.workers },
		Recorder:      e.events.record,
		Logger:        zaptest.NewLogger(t),
		Status:        status.NewManager(status.Options{Logger: zaptest.NewLogger(t)}),
	}
	for _, m := range mods {
		m(&opts)
	}
	k, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.k = k
	return e
}

// ready marks the runtime ready, as Run's first check does.
func (e *env) ready() {
	e.k.updateRuntimeUp(context.Background())
}

func staticPod(name, uid string, mods ...func(*v1.Pod)) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: k8stypes.UID(uid),
			Annotations:       map[string]string{kubecontainer.ConfigSourceAnnotationKey: kubecontainer.FileSource},
			CreationTimestamp: metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
		},
		Spec: v1.PodSpec{
			NodeName:      "node-1",
			RestartPolicy: v1.RestartPolicyAlways,
			Containers:    []v1.Container{{Name: "c", Image: "busybox"}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }
