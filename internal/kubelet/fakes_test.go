package kubelet

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/flowcontrol"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/prober"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/runtimehelper"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/runtimestate"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/eventtest"
	"github.com/kubelet-dockershim/kubelet/internal/testutil/podtest"
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
	// restartAll: the pod was restarting all its containers.
	restartAll bool
}

type killCall struct {
	pod     *v1.Pod
	running *kubecontainer.Pod
	grace   *int64
}

func (r *fakeRuntime) SyncPod(_ context.Context, pod *v1.Pod, st *kubecontainer.PodStatus, _ []v1.Secret, b *flowcontrol.Backoff, restartAll bool) kubecontainer.PodSyncResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.syncCalls = append(r.syncCalls, syncCall{pod, st, b, restartAll})
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

func (r *fakeRuntime) IsPodResizeInProgress(*v1.Pod, *kubecontainer.PodStatus) bool { return false }
func (r *fakeRuntime) ForgetPod(*v1.Pod)                                            {}

func (r *fakeRuntime) UpdateContainerResources(context.Context, string, *runtimeapi.ContainerResources) error {
	return nil
}

func (r *fakeRuntime) GarbageCollect(context.Context, kubecontainer.GCPolicy, bool, bool, kubecontainer.PodStateProvider) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gcCalls++
	return nil
}

func (r *fakeRuntime) Status(context.Context) (*runtimeapi.StatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.statusErr != nil {
		return nil, r.statusErr
	}
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: !r.notReady, Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"},
	}}}, nil
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

// fakePLEG delivers events the test sends and records PodChanged.
type fakePLEG struct {
	ch      chan *pleg.PodLifecycleEvent
	healthy bool
	ran     chan struct{}

	mu      sync.Mutex
	changed []k8stypes.UID
}

func (p *fakePLEG) Run(ctx context.Context) {
	if p.ran != nil {
		close(p.ran)
	}
	<-ctx.Done()
}
func (p *fakePLEG) Watch() <-chan *pleg.PodLifecycleEvent { return p.ch }
func (p *fakePLEG) RequestPodReinspect(k8stypes.UID)      {}

func (p *fakePLEG) PodChanged(uid k8stypes.UID, _, _ string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.changed = append(p.changed, uid)
}

func (p *fakePLEG) changes() []k8stypes.UID {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.changed)
}

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
	podtest.MarkProbed(st)
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
	k         *Kubelet
	runtime   *fakeRuntime
	streaming *fakeStreamingRuntime
	helper    *recordingHelper
	state     *runtimestate.State
	source    *fakeSource
	pleg      *fakePLEG
	prober    *fakeProber
	volumes   *fakeVolumes
	workers   *fakeWorkers
	events    *eventLog
	root      string
}

// eventLog keeps the pod events; all renders them "type reason: message".
type eventLog struct{ eventtest.Recorder }

func (l *eventLog) all() []string {
	var out []string
	for _, e := range l.Events() {
		out = append(out, e.Type+" "+e.Reason+": "+e.Message)
	}
	return out
}

func newEnv(t *testing.T, mods ...func(*Options)) *env {
	t.Helper()
	e := &env{
		runtime: &fakeRuntime{statuses: map[k8stypes.UID]*kubecontainer.PodStatus{}},
		source:  &fakeSource{ch: make(chan kubecontainer.PodUpdate, 4), seen: true},
		pleg:    &fakePLEG{ch: make(chan *pleg.PodLifecycleEvent, 4), healthy: true},
		prober:  newFakeProber(),
		volumes: &fakeVolumes{base: t.TempDir()},
		workers: &fakeWorkers{},
		events:  &eventLog{},
		root:    t.TempDir(),
	}
	e.streaming = &fakeStreamingRuntime{fakeRuntime: e.runtime}
	helper, err := runtimehelper.New(runtimehelper.Options{RootDir: e.root, DNS: fakeDNS{}, Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	e.helper = &recordingHelper{RuntimeHelper: helper, vols: map[k8stypes.UID]map[string]volumes.VolumeInfo{}}
	if e.state, err = runtimestate.New(runtimestate.Options{Runtime: e.runtime}); err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Parts: Parts{
			Runtime: e.runtime, Streaming: e.streaming, Helper: e.helper, State: e.state,
			Sources: e.source, PLEG: e.pleg, Prober: e.prober, Volumes: e.volumes,
			NewPodWorkers: func(podworkers.SyncFuncs) PodWorkers { return e.workers },
			Status:        status.NewManager(status.Options{Logger: zaptest.NewLogger(t)}),
		},
		Config:   Config{NodeIP: []byte{192, 168, 1, 10}},
		Recorder: e.events,
		Logger:   zaptest.NewLogger(t),
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

// recordingHelper is the real runtime helper with the volume records the
// kubelet hands it kept visible.
type recordingHelper struct {
	*runtimehelper.RuntimeHelper
	mu   sync.Mutex
	vols map[k8stypes.UID]map[string]volumes.VolumeInfo
}

func (h *recordingHelper) SetVolumes(uid k8stypes.UID, infos map[string]volumes.VolumeInfo) {
	h.mu.Lock()
	h.vols[uid] = infos
	h.mu.Unlock()
	h.RuntimeHelper.SetVolumes(uid, infos)
}

func (h *recordingHelper) ForgetVolumes(uid k8stypes.UID) {
	h.mu.Lock()
	delete(h.vols, uid)
	h.mu.Unlock()
	h.RuntimeHelper.ForgetVolumes(uid)
}

// volume reports the recorded volume of the pod, and whether the pod has
// records at all.
func (h *recordingHelper) volume(uid k8stypes.UID, name string) (volumes.VolumeInfo, bool, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	infos, known := h.vols[uid]
	v, ok := infos[name]
	return v, ok, known
}

// ready marks the runtime ready, as the runtime state's first check does.
func (e *env) ready() {
	e.state.Check(context.Background())
}

var (
	staticPod = podtest.StaticPod
	uids      = podtest.UIDs
)

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

func ptr[T any](v T) *T { return podtest.Ptr(v) }
