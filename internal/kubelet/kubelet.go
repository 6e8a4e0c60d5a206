package kubelet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/apistatus"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podmanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// syncLoopStallThreshold: Healthz fails when the sync loop has not turned for
// this long.
const syncLoopStallThreshold = 3 * time.Minute

// loopConfig holds the sync loop's settings.
type loopConfig struct {
	housekeeping time.Duration
	gc           time.Duration
	gcPolicy     kubecontainer.GCPolicy
	maxPods      int
}

// deps are the pieces the kubelet drives.
type deps struct {
	runtime   Runtime
	sources   PodSource
	pleg      PLEG
	prober    Prober
	volumes   VolumeManager
	resources NodeAllocatable // nil: none
	node      NodeGetter      // nil: standalone
	cgroups   PodCgroups
	cpus      CPUManager
	memory    MemoryManager
	devices   DeviceAllocator      // nil: none
	topology  ResourceAligner      // nil: allocation without alignment
	pressure  PressureAdmitter     // nil: none
	features  NodeFeatures         // nil: none
	sysctls   PodAdmitter          // nil: none
	shutdown  PodAdmitter          // nil: none
	cache     *kubecontainer.Cache // nil with custom pod workers (tests)
}

// Kubelet is the node's coordinator; see the package doc.
type Kubelet struct {
	cfg      loopConfig
	deps     deps
	logger   *zap.Logger
	recorder record.EventRecorder

	status    *status.Manager
	helper    RuntimeHelper
	streaming StreamingRuntime
	syncer    *podSyncer
	workers   PodWorkers
	pods      *podmanager.Manager
	reasons   *apistatus.ReasonCache
	state     RuntimeState
	mirrors   *mirrorKeeper
	resize    *resizer // nil: no in-place resize
	deadline  *activeDeadline
	admission *admitChain

	started  atomic.Bool
	lastLoop atomic.Int64  // unix nanoseconds of the last sync loop turn
	gcSoon   chan struct{} // a terminated pod asks for an early container GC
}

// New wires a Kubelet from opts. It starts nothing and does no I/O.
func New(opts Options) (*Kubelet, error) {
	opts = opts.withDefaults()
	p, c := opts.Parts, opts.Config
	if err := p.validate(); err != nil {
		return nil, err
	}
	reasons := apistatus.NewReasonCache()
	var rs *resizer
	deadline := &activeDeadline{clock: clock.RealClock{}, status: p.Status, recorder: opts.Recorder}
	genOpts := apistatus.Options{NodeIP: c.NodeIP, Status: p.Status, Probes: p.Prober, Reasons: reasons, Evict: []apistatus.EvictHandler{deadline},
		RestartRules: c.RestartRules}
	if p.Allocated != nil {
		rs = newResizer(p.Allocated, c.CPUManagerStatic, c.MemoryManagerStatic, c.NoPodLevelResize)
		genOpts.Resize = rs
		if !c.NoPodLevelResize {
			genOpts.PodCgroups = p.Cgroups
		}
	}
	gen, err := apistatus.New(genOpts)
	if err != nil {
		return nil, err
	}
	sm, err := newSyncMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	k := &Kubelet{
		gcSoon: make(chan struct{}, 1),
		cfg:    loopConfig{housekeeping: c.HousekeepingInterval, gc: c.GCInterval, gcPolicy: c.GCPolicy, maxPods: c.MaxPods},
		deps: deps{runtime: p.Runtime, sources: p.Sources, pleg: p.PLEG, prober: p.Prober, volumes: p.Volumes,
			resources: p.Resources, node: p.Node, cgroups: p.Cgroups, cpus: p.CPUs, memory: p.Memory, devices: p.Devices, topology: p.Topology, features: p.Features, sysctls: p.Sysctls, cache: p.Cache},
		logger:    opts.Logger.Named("kubelet"),
		recorder:  opts.Recorder,
		status:    p.Status,
		helper:    p.Helper,
		streaming: p.Streaming,
		pods:      p.Pods,
		reasons:   reasons,
		state:     p.State,
		resize:    rs,
		deadline:  deadline,
	}
	if p.Mirrors != nil {
		k.mirrors = &mirrorKeeper{client: p.Mirrors, pods: k.pods, logger: k.logger}
	}
	k.admission = newAdmitChain(k.deps, admitFunc(k.canAdmit), k.logger)
	k.syncer = &podSyncer{
		runtime: p.Runtime, volumes: p.Volumes, prober: p.Prober, status: p.Status, helper: p.Helper,
		gen: gen, reasons: reasons, state: p.State, recorder: opts.Recorder, mirrors: k.mirrors,
		secrets: p.Secrets, objects: p.Objects, backOff: c.CrashLoopBackOff, metrics: sm, logger: k.logger, cgroups: p.Cgroups, cpus: p.CPUs, memory: p.Memory, resize: rs, pleg: p.PLEG, activePods: k.ActivePods,
		rules: c.RestartRules, requeue: k.resyncPod,
		requestGC: func() {
			select {
			case k.gcSoon <- struct{}{}:
			default:
			}
		},
	}
	var sync podworkers.SyncFuncs = k.syncer
	if opts.Tracer != nil {
		sync = tracedSync{inner: k.syncer, tracer: opts.Tracer}
	}
	if p.NewPodWorkers != nil {
		k.workers = p.NewPodWorkers(sync)
	} else {
		if k.workers, err = podworkers.New(podworkers.Options{
			Sync:           sync,
			Cache:          p.Cache,
			ResyncInterval: c.ResyncInterval,
			BackOffPeriod:  defaultBackOffPeriod,
			Registerer:     opts.Registerer,
			Logger:         opts.Logger,
		}); err != nil {
			return nil, err
		}
	}
	// Last: the test reads the pod workers.
	k.pods.SetActive(func(p *v1.Pod) bool { return !k.isPodInactive(p) })
	return k, nil
}

// ActivePods are the desired pods that are not done (not known terminated,
// not in a terminal phase): those the QoS cgroups are sized for.
func (k *Kubelet) ActivePods() []*v1.Pod { return k.pods.ActivePods() }

// Run runs the PLEG and the sync loop until ctx ends, then stops the pod
// workers and returns nil. It does not kill pods: their containers keep running
// and the next kubelet adopts them. Run may be called once.
func (k *Kubelet) Run(ctx context.Context) error {
	if !k.started.CompareAndSwap(false, true) {
		return errors.New("kubelet: Run called twice")
	}
	k.logger.Info("Starting the kubelet sync loop")
	k.syncer.setProbeContext(ctx)

	var wg sync.WaitGroup
	wg.Go(func() {
		defer logging.HandleCrash(k.logger, "pleg")
		k.deps.pleg.Run(ctx)
	})
	wg.Go(func() {
		defer logging.HandleCrash(k.logger, "container gc")
		k.gcLoop(ctx)
	})

	k.syncLoop(ctx)

	k.logger.Info("Stopping the pod workers; containers keep running")
	k.workers.Stop()
	wg.Wait()
	return nil
}

// Healthz reports whether the kubelet is healthy: the PLEG relists, the
// runtime is ready and the sync loop turns.
func (k *Kubelet) Healthz() error {
	if ok, err := k.deps.pleg.Healthy(); !ok {
		return fmt.Errorf("PLEG is not healthy: %w", err)
	}
	if err := k.state.RuntimeError(); err != nil {
		return err
	}
	if last := k.lastLoop.Load(); last == 0 || time.Since(time.Unix(0, last)) > syncLoopStallThreshold {
		return errors.New("the sync loop is not running")
	}
	return nil
}

// Pods returns the desired pods with their current status, oldest first.
func (k *Kubelet) Pods() []v1.Pod {
	pods := k.pods.All()
	out := make([]v1.Pod, 0, len(pods))
	for _, p := range pods {
		c := p.DeepCopy()
		if st, ok := k.status.GetPodStatus(p.UID); ok {
			c.Status = st
		}
		out = append(out, *c)
	}
	return out
}

// garbageCollect removes dead containers per the GC policy.
func (k *Kubelet) garbageCollect(ctx context.Context) {
	err := k.deps.runtime.GarbageCollect(ctx, k.cfg.gcPolicy, k.deps.sources.SeenAllSources(), false, k.workers)
	if err != nil && ctx.Err() == nil {
		k.logger.Error("Container garbage collection failed", zap.Error(err))
	}
}

// gcLoop collects dead containers every GC interval, and shortly after a pod
// terminated, so that a removed pod's exited containers and sandbox go at once
// rather than at the next periodic GC (as upstream's container deletor does).
func (k *Kubelet) gcLoop(ctx context.Context) {
	t := time.NewTicker(k.cfg.gc)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-k.gcSoon:
			// Let the pod worker finish the termination first (the GC asks it whether
			// the pod's runtime may be removed).
			select {
			case <-ctx.Done():
				return
			case <-time.After(gcAfterTermination):
			}
		}
		k.garbageCollect(ctx)
	}
}

// gcAfterTermination is the delay between a pod's termination and its early GC.
const gcAfterTermination = 2 * time.Second

// PodCouldHaveRunningContainers reports whether the pod's containers may
// still run: its terminal phase is not reported before they stopped.
func (k *Kubelet) PodCouldHaveRunningContainers(pod *v1.Pod) bool {
	return k.workers.CouldHaveRunningContainers(pod.UID)
}

// PodResourcesAreReclaimed reports whether nothing of the pod is left: its
// worker finished SyncTerminatedPod (containers stopped, volumes torn down) or
// it never ran. The status manager deletes a deleted API pod only then.
func (k *Kubelet) PodResourcesAreReclaimed(pod *v1.Pod) bool {
	return !k.PodCouldHaveRunningContainers(pod)
}
