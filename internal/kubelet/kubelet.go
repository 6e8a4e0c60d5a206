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

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
	"github.com/kubelet-dockershim/kubelet/internal/kuberuntime"
)

// syncLoopStallThreshold: Healthz fails when the sync loop has not turned for
// this long.
const syncLoopStallThreshold = 3 * time.Minute

// loopConfig holds the sync loop's settings.
type loopConfig struct {
	housekeeping time.Duration
	gc           time.Duration
	runtimeCheck time.Duration
	gcPolicy     kuberuntime.GCPolicy
	maxPods      int
}

// deps are the pieces the kubelet drives.
type deps struct {
	runtime Runtime
	sources PodSource
	pleg    PLEG
	prober  Prober
	volumes VolumeManager
}

// Kubelet is the node's coordinator; see the package doc.
type Kubelet struct {
	cfg      loopConfig
	deps     deps
	logger   *zap.Logger
	recorder Recorder

	status  *status.Manager
	helper  *RuntimeHelper
	syncer  *podSyncer
	workers PodWorkers
	pods    *podStore
	reasons *reasonCache
	state   *runtimeState
	node    NodeGetter
	mirrors *mirrorKeeper

	started  atomic.Bool
	lastLoop atomic.Int64  // unix nanoseconds of the last sync loop turn
	gcSoon   chan struct{} // a terminated pod asks for an early container GC
}

// New wires a Kubelet from opts. It starts nothing and does no I/O.
func New(opts Options) (*Kubelet, error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	helper := opts.Helper
	if helper == nil {
		var err error
		if helper, err = NewRuntimeHelper(opts); err != nil {
			return nil, err
		}
	}
	st := opts.Status
	if st == nil {
		st = status.NewManager(status.Options{Logger: opts.Logger.Named("status")})
	}
	k := &Kubelet{
		gcSoon: make(chan struct{}, 1),
		cfg: loopConfig{
			housekeeping: opts.HousekeepingInterval,
			gc:           opts.GCInterval,
			runtimeCheck: DefaultRuntimeCheckInterval,
			gcPolicy:     opts.GCPolicy,
			maxPods:      opts.MaxPods,
		},
		deps: deps{runtime: opts.Runtime, sources: opts.Sources, pleg: opts.PLEG,
			prober: opts.Prober, volumes: opts.Volumes},
		logger:   opts.Logger.Named("kubelet"),
		recorder: opts.Recorder,
		status:   st,
		helper:   helper,
		pods:     newPodStore(),
		reasons:  newReasonCache(),
		state:    newRuntimeState(),
		node:     opts.Node,
	}
	if opts.Mirrors != nil {
		k.mirrors = &mirrorKeeper{client: opts.Mirrors, pods: k.pods, logger: k.logger}
	}
	k.syncer = &podSyncer{
		runtime: opts.Runtime, volumes: opts.Volumes, prober: opts.Prober, status: st, helper: helper,
		gen:      &statusGenerator{nodeIP: opts.NodeIP, status: st, probes: opts.Prober, reasons: k.reasons},
		reasons:  k.reasons,
		state:    k.state,
		recorder: opts.Recorder,
		mirrors:  k.mirrors,
		secrets:  opts.Secrets,
		backOff:  opts.CrashLoopBackOff,
		logger:   k.logger,
		requestGC: func() {
			select {
			case k.gcSoon <- struct{}{}:
			default:
			}
		},
	}
	if opts.NewPodWorkers != nil {
		k.workers = opts.NewPodWorkers(k.syncer)
	} else {
		k.workers = podworkers.New(podworkers.Options{
			Sync:           k.syncer,
			Cache:          opts.Cache,
			ResyncInterval: opts.ResyncInterval,
			BackOffPeriod:  defaultBackOffPeriod,
			Logger:         opts.Logger,
		})
	}
	return k, nil
}

// Run runs the PLEG and the sync loop until ctx ends, then stops the pod
// workers and returns nil. It does not kill pods: their containers keep running
// and the next kubelet adopts them. Run may be called once.
func (k *Kubelet) Run(ctx context.Context) error {
	if !k.started.CompareAndSwap(false, true) {
		return errors.New("kubelet: Run called twice")
	}
	k.logger.Info("Starting the kubelet sync loop")
	k.syncer.setProbeContext(ctx)
	k.updateRuntimeUp(ctx)

	var wg sync.WaitGroup
	wg.Go(func() { k.deps.pleg.Run(ctx) })
	wg.Go(func() { k.every(ctx, k.cfg.runtimeCheck, k.updateRuntimeUp) })
	wg.Go(func() { k.gcLoop(ctx) })

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
	if err := k.state.runtimeError(); err != nil {
		return err
	}
	if last := k.lastLoop.Load(); last == 0 || time.Since(time.Unix(0, last)) > syncLoopStallThreshold {
		return errors.New("the sync loop is not running")
	}
	return nil
}

// Pods returns the desired pods with their current status, oldest first.
func (k *Kubelet) Pods() []v1.Pod {
	pods := k.pods.all()
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

// updateRuntimeUp records the runtime's health (upstream updateRuntimeUp).
func (k *Kubelet) updateRuntimeUp(ctx context.Context) {
	st, err := k.deps.runtime.Status(ctx)
	if ctx.Err() != nil {
		return
	}
	k.state.update(st, err, time.Now())
	if err := k.state.runtimeError(); err != nil {
		k.logger.Warn("Container runtime is not ready", zap.Error(err))
	}
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

// every calls f every period until ctx ends.
func (k *Kubelet) every(ctx context.Context, period time.Duration, f func(context.Context)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f(ctx)
		}
	}
}

// PodResourcesAreReclaimed reports whether nothing of the pod is left: its
// worker finished SyncTerminatedPod (containers stopped, volumes torn down) or
// it never ran. The status manager deletes a deleted API pod only then.
func (k *Kubelet) PodResourcesAreReclaimed(pod *v1.Pod) bool {
	return !k.workers.CouldHaveRunningContainers(pod.UID)
}

// ReadinessError is nil when the runtime and its network are ready, else the
// reason the node is not ready (the node's Ready condition message).
func (k *Kubelet) ReadinessError() error {
	if err := k.state.runtimeError(); err != nil {
		return err
	}
	return k.state.networkError()
}
