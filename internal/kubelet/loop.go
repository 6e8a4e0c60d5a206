package kubelet

import (
	"context"
	"strings"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/admission"
	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/pleg"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podworkers"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/prober"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
)

// runtimeDownPause is how long the sync loop waits while the runtime is down.
const runtimeDownPause = time.Second

// orphanGracePeriod is the grace period of runtime pods without a config.
const orphanGracePeriod int64 = 1

// syncLoop dispatches source updates, PLEG events, probe results and
// housekeeping until ctx ends (upstream syncLoop/syncLoopIteration). While the
// runtime is not ready nothing is dispatched.
func (k *Kubelet) syncLoop(ctx context.Context) {
	housekeeping := time.NewTicker(k.cfg.housekeeping)
	defer housekeeping.Stop()
	// Every second, as upstream's sync ticker, the pods past their active
	// deadline are synced (their status fails them).
	deadlines := time.NewTicker(time.Second)
	defer deadlines.Stop()
	updates := k.deps.sources.Updates()
	events := k.deps.pleg.Watch()
	for {
		k.lastLoop.Store(time.Now().UnixNano())
		if err := k.state.RuntimeError(); err != nil {
			k.logger.Debug("Skipping pod synchronization", zap.Error(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(runtimeDownPause):
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case u, ok := <-updates:
			if !ok {
				k.logger.Warn("The pod sources closed their update channel")
				updates = nil
				continue
			}
			k.handleSourceUpdate(u)
		case e := <-events:
			k.handlePLEGEvent(e)
		case u := <-k.deps.prober.LivenessUpdates():
			if u.Result == prober.Failure {
				k.syncPodByUID(u.PodUID, "liveness probe failed")
			}
		case u := <-k.deps.prober.ReadinessUpdates():
			k.status.SetContainerReadiness(u.PodUID, u.ContainerID, u.Result == prober.Success)
			k.syncPodByUID(u.PodUID, "readiness changed")
		case u := <-k.deps.prober.StartupUpdates():
			k.status.SetContainerStartup(u.PodUID, u.ContainerID, u.Result == prober.Success)
			k.syncPodByUID(u.PodUID, "startup changed")
		case <-deadlines.C:
			k.syncPastDeadline()
		case <-housekeeping.C:
			if k.deps.sources.SeenAllSources() {
				k.housekeeping(ctx)
			}
		}
	}
}

// handleSourceUpdate applies a source update: removed pods are killed, new pods
// admitted and started, changed pods updated.
func (k *Kubelet) handleSourceUpdate(u kubecontainer.PodUpdate) {
	ch := k.pods.Apply(u)
	k.logger.Debug("Pod source update", zap.String("source", u.Source), zap.Stringer("op", u.Op),
		zap.Int("adds", len(ch.Adds)), zap.Int("updates", len(ch.Updates)), zap.Int("removes", len(ch.Removes)))
	for _, p := range ch.Removes {
		if !k.pods.IsAdmitted(p.UID) {
			continue // rejected: it never ran
		}
		k.logger.Info("Pod removed by its source", zap.String("pod", podRef(p)), zap.String("podUID", string(p.UID)))
		k.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p})
	}
	for _, p := range ch.Adds {
		k.handleAdd(p)
	}
	if len(ch.Removes) > 0 {
		k.retryPendingResizes("pods_removed")
	}
	for _, p := range ch.Updates {
		if !k.pods.IsAdmitted(p.UID) {
			continue // rejected pods stay rejected
		}
		if k.resize.resizeRequested(p) {
			k.handleResize(p)
		}
		k.warnMissingFeatures(ch.Replaced[p.UID], p)
		k.logger.Info("Pod changed by its source", zap.String("pod", podRef(p)))
		k.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate, Pod: p})
	}
	for _, p := range ch.Reconciles {
		k.reconcileReadiness(p)
	}
	// A mirror pod changed or went away: its static pod's sync fixes it.
	for _, key := range ch.Mirrors {
		ns, name, _ := strings.Cut(key, "/")
		if p, ok := k.pods.ByFullName(ns, name); ok && kubecontainer.IsStaticPod(p) && k.pods.IsAdmitted(p.UID) {
			k.syncPodByUID(p.UID, "mirror pod changed")
		}
	}
}

// warnMissingFeatures records a warning (upstream's event) when the change
// from old to p needs node features the node does not declare; the API
// server normally refuses such a change first.
func (k *Kubelet) warnMissingFeatures(old, p *v1.Pod) {
	if k.deps.features == nil || old == nil {
		return
	}
	missing, err := k.deps.features.MissingForUpdate(old, p)
	if err != nil {
		k.logger.Error("check the node features a pod update needs", zap.String("pod", podRef(p)), zap.Error(err))
		return
	}
	if len(missing) == 0 {
		return
	}
	list := strings.Join(missing, ", ")
	k.logger.Error("Pod requires node features that are not available", zap.String("pod", podRef(p)), zap.String("missingFeatures", list))
	k.recorder.Eventf(p, v1.EventTypeWarning, eventFailedNodeDeclaredFeaturesCheck, "Pod requires node features that are not available: %s", list)
}

// reconcileReadiness syncs an admitted pod whose API status changed alone
// when its Ready condition no longer matches its readiness gates (upstream
// HandlePodReconcile): the sync hands the pod workers the pod with the API's
// latest conditions, from which the status is generated again.
func (k *Kubelet) reconcileReadiness(p *v1.Pod) {
	if !k.pods.IsAdmitted(p.UID) || !status.ReadinessNeedsReconcile(p) {
		return
	}
	k.logger.Info("Pod readiness gates changed", zap.String("pod", podRef(p)))
	k.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
}

// handleAdd admits a new pod and hands it to the pod workers, or rejects it.
func (k *Kubelet) handleAdd(p *v1.Pod) {
	if !k.workers.IsPodTerminationRequested(p.UID) {
		if reason, msg, ok := k.admission.admit(p); !ok {
			k.reject(p, reason, msg)
			return
		}
	}
	k.logger.Info("Pod added", zap.String("pod", podRef(p)), zap.String("podUID", string(p.UID)))
	k.pods.MarkAdmitted(p.UID)
	if err := k.resize.allocate(p); err != nil {
		k.logger.Error("record the pod's allocation", zap.String("pod", podRef(p)), zap.Error(err))
	}
	if k.resize.resizeRequested(p) { // a resize pending when the kubelet restarted
		defer k.handleResize(p)
	}
	k.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
}

// freshNodeTimeout bounds admission's read of the node from the API server.
const freshNodeTimeout = 10 * time.Second

// canAdmit runs the admission checks (internal/kubelet/admission) against
// the admitted active pods and the node: its API object when known, else the
// kubelet's own allocatable (as upstream's getNodeAnyWay falls back to the
// initial node). When the node affinity refuses the pod, the node is read
// from the API server and the checks run again, as upstream's predicate
// admit handler does: a label the scheduler saw may not have reached the
// known node yet.
func (k *Kubelet) canAdmit(p *v1.Pod) (reason, message string, ok bool) {
	var others []*v1.Pod
	for _, other := range k.pods.ActivePods() {
		if other.UID != p.UID && k.pods.IsAdmitted(other.UID) {
			others = append(others, k.resize.allocatedPod(other))
		}
	}
	var node *v1.Node
	if k.deps.node != nil {
		node, _ = k.deps.node.Node()
	}
	reason, message, ok = admission.Admit(p, k.admissionTarget(node), others)
	if ok || reason != admission.ReasonNodeAffinity || k.deps.node == nil {
		return reason, message, ok
	}
	ctx, cancel := context.WithTimeout(context.Background(), freshNodeTimeout)
	defer cancel()
	fresh, err := k.deps.node.FreshNode(ctx)
	if err != nil {
		k.logger.Error("Failed to synchronously fetch node info", zap.String("pod", podRef(p)), zap.Error(err))
		return reason, message, ok
	}
	return admission.Admit(p, k.admissionTarget(fresh), others)
}

// admissionTarget is what a pod is admitted against: node (nil: not known)
// with its allocatable, else the kubelet's own allocatable.
func (k *Kubelet) admissionTarget(node *v1.Node) admission.Target {
	target := admission.Target{MaxPods: k.cfg.maxPods, Node: node}
	switch {
	case node != nil:
		target.Allocatable = node.Status.Allocatable
	case k.deps.resources != nil:
		target.Allocatable = k.deps.resources.Allocatable()
	}
	return target
}

// reject marks the pod Failed without running it.
func (k *Kubelet) reject(p *v1.Pod, reason, message string) {
	k.logger.Warn("Pod rejected", zap.String("pod", podRef(p)), zap.String("reason", reason), zap.String("message", message))
	k.recorder.Eventf(p, v1.EventTypeWarning, reason, "%s", message)
	k.status.SetPodStatus(p, v1.PodStatus{
		Phase:    v1.PodFailed,
		Reason:   reason,
		Message:  "Pod was rejected: " + message,
		QOSClass: kubecontainer.GetPodQOS(p),
	})
}

// isPodInactive reports whether the pod is done: known terminated by the
// workers, or in a terminal phase and not being terminated.
func (k *Kubelet) isPodInactive(p *v1.Pod) bool {
	if k.workers.IsPodKnownTerminated(p.UID) {
		return true
	}
	terminal := status.IsTerminal(p.Status.Phase)
	if phase, ok := k.status.PodPhase(p.UID); ok && status.IsTerminal(phase) {
		terminal = true
	}
	return terminal && !k.workers.IsPodTerminationRequested(p.UID)
}

// handlePLEGEvent syncs the pod a container event is about.
func (k *Kubelet) handlePLEGEvent(e *pleg.PodLifecycleEvent) {
	if e == nil || e.Type == pleg.ContainerRemoved {
		return
	}
	k.syncPodByUID(e.ID, string(e.Type))
}

// syncPodByUID asks the pod workers to sync a desired pod.
func (k *Kubelet) syncPodByUID(uid k8stypes.UID, why string) {
	p, ok := k.pods.Get(uid)
	if !ok {
		k.logger.Debug("Ignoring an event for an unknown pod", zap.String("podUID", string(uid)), zap.String("event", why))
		return
	}
	k.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
}

// resyncPod asks the pod workers for another sync of a desired pod (an
// update, as upstream requeues a pod after resetting its containers).
func (k *Kubelet) resyncPod(uid k8stypes.UID) {
	if p, ok := k.pods.Get(uid); ok {
		k.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodUpdate, Pod: p})
	}
}

// syncPastDeadline syncs the active pods past their activeDeadlineSeconds
// whose status is not terminal yet.
func (k *Kubelet) syncPastDeadline() {
	for _, p := range k.pods.All() {
		if p.Spec.ActiveDeadlineSeconds == nil || k.isPodInactive(p) || !k.deadline.pastDeadline(p) {
			continue
		}
		if st, ok := k.status.GetPodStatus(p.UID); ok && status.IsTerminal(st.Phase) {
			continue
		}
		k.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p})
	}
}

// housekeeping reconciles the pod workers, probes, statuses, pod directories
// and the runtime with the desired pods (upstream HandlePodCleanups):
//  1. the workers forget terminated pods no longer desired;
//  2. probes stop for pods that cannot be running; statuses and failure
//     reasons of gone pods are dropped;
//  3. directories (and volumes) of pods that are neither desired, known to the
//     workers nor in the runtime are removed;
//  4. desired, admitted, active pods the workers do not know are started;
//  5. runtime pods the workers do not know are killed (1s grace);
//  6. mirror pods whose static pod is gone and stopped are deleted.
func (k *Kubelet) housekeeping(ctx context.Context) {
	desired := k.pods.All()
	working := k.workers.SyncKnownPods(desired)
	if working == nil {
		working = map[k8stypes.UID]podworkers.PodWorkerSync{}
	}
	running, err := k.deps.runtime.GetPods(ctx, false)
	if err != nil {
		if ctx.Err() == nil {
			k.logger.Error("Housekeeping: listing runtime pods failed", zap.Error(err))
		}
		return
	}
	desiredUIDs := make(map[k8stypes.UID]bool, len(desired))
	for _, p := range desired {
		desiredUIDs[p.UID] = true
	}
	possiblyRunning := map[k8stypes.UID]struct{}{}
	known := make(map[k8stypes.UID]bool, len(working)+len(desired))
	for uid, w := range working {
		known[uid] = true
		if w.State == podworkers.SyncPod || w.State == podworkers.TerminatingPod {
			possiblyRunning[uid] = struct{}{}
		}
	}
	k.deps.prober.CleanupPods(possiblyRunning)
	k.status.RemoveOrphanedStatuses(desiredUIDs)
	if retry, err := k.resize.cleanup(desiredUIDs); err != nil {
		k.logger.Error("Housekeeping: removing the allocations of gone pods", zap.Error(err))
	} else if retry {
		k.retryPendingResizes("periodic_retry")
	}
	active := map[k8stypes.UID]bool{}
	for uid := range desiredUIDs {
		known[uid], active[uid] = true, true
	}
	for uid := range working {
		active[uid] = true
	}
	for _, rp := range running {
		active[rp.ID] = true
	}
	k.reasons.Retain(known)
	k.pods.RetainAdmitted()
	if err := k.deps.volumes.CleanupOrphans(ctx, active); err != nil && ctx.Err() == nil {
		k.logger.Error("Housekeeping: cleaning up orphaned pod directories failed", zap.Error(err))
	}
	if err := k.deps.cgroups.CleanupOrphans(active); err != nil {
		k.logger.Error("Housekeeping: cleaning up orphaned pod cgroups failed", zap.Error(err))
	}
	k.restartUnknownPods(desired, working)
	k.killOrphans(running, working)
	k.mirrors.cleanup(ctx, func(namespace, name string) bool {
		for _, rp := range running {
			if rp.Namespace == namespace && rp.Name == name {
				return true
			}
		}
		return false
	})
	k.syncer.backOff.GC()
}

// restartUnknownPods starts desired pods the workers forgot (UID reuse) and
// records them in working.
func (k *Kubelet) restartUnknownPods(desired []*v1.Pod, working map[k8stypes.UID]podworkers.PodWorkerSync) {
	for _, p := range desired {
		if _, ok := working[p.UID]; ok || !k.pods.IsAdmitted(p.UID) || k.isPodInactive(p) {
			continue
		}
		k.logger.Info("Restarting a desired pod the workers do not know", zap.String("pod", podRef(p)))
		k.workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: p})
		working[p.UID] = podworkers.PodWorkerSync{State: podworkers.SyncPod, HasConfig: true, Static: kubecontainer.IsStaticPod(p)}
	}
}

// killOrphans terminates runtime pods that have no worker (no config).
func (k *Kubelet) killOrphans(running []*kubecontainer.Pod, working map[k8stypes.UID]podworkers.PodWorkerSync) {
	for _, rp := range running {
		if _, ok := working[rp.ID]; ok {
			continue
		}
		grace := orphanGracePeriod
		k.logger.Info("Killing an orphaned runtime pod", zap.String("pod", rp.Namespace+"/"+rp.Name),
			zap.String("podUID", string(rp.ID)))
		k.workers.UpdatePod(podworkers.UpdatePodOptions{
			UpdateType:     podworkers.SyncPodKill,
			RunningPod:     rp,
			KillPodOptions: &podworkers.KillPodOptions{PodTerminationGracePeriodSecondsOverride: &grace},
		})
	}
}

func podRef(p *v1.Pod) string { return p.Namespace + "/" + p.Name }
