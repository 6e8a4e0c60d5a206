package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/lifecycle"
)

// requestTimeout bounds each API call of the sync loop, so that a hung API
// server delays the other pods by at most this much per pod.
const requestTimeout = 10 * time.Second

// ack is what the API server holds of one source pod's status (the API sync's
// bookkeeping, under Manager.mu).
type ack struct {
	// version is the last status version written or found up to date.
	version uint64
	// apiUID is the API pod it landed on (the mirror pod for a static pod).
	apiUID k8stypes.UID
	// gone: the API object of this pod is deleted or replaced by a pod with
	// another UID; nothing is written for it any more.
	gone bool
}

// podSync is one pod picked for syncing: its (immutable) store entry and
// what the API server acknowledged so far.
type podSync struct {
	uid   k8stypes.UID
	e     *entry
	ack   ack
	acked bool
}

func (p podSync) static() bool { return kubecontainer.IsStaticPod(p.e.pod) }

// SyncOptions configures a Syncer. Client is required.
type SyncOptions struct {
	// Client publishes statuses to the API server.
	Client kubernetes.Interface
	// NodeName is this node; API pods bound elsewhere are never patched.
	NodeName string
	// PodDeletionSafety gates the final DELETE of pods being deleted; nil =
	// resources count as reclaimed once the pod's status is final.
	PodDeletionSafety PodDeletionSafetyProvider
	// SyncPeriod is the full resync period; 0 = DefaultSyncPeriod.
	SyncPeriod time.Duration
	// Logger; nil = no logging.
	Logger *zap.Logger
	// Updated, if set, is given each pod as the API server returned it after
	// a status patch that changed it (the pod start SLI's running time).
	Updated StatusUpdateObserver
}

// StatusUpdateObserver learns the pods whose status the API server took.
type StatusUpdateObserver interface {
	RecordStatusUpdated(pod *v1.Pod)
}

// Syncer publishes a status store to the API server (Run). It is built
// after the store and after what tells it that a pod's resources are
// reclaimed (the kubelet), so that the store itself needs neither.
type Syncer struct {
	store      *Manager
	client     kubernetes.Interface
	nodeName   string
	loops      lifecycle.Loops // what Start began
	safety     PodDeletionSafetyProvider
	syncPeriod time.Duration
	logger     *zap.Logger
	updated    StatusUpdateObserver
}

// NewSyncer wires a Syncer of store; it starts nothing.
func NewSyncer(store *Manager, opts SyncOptions) (*Syncer, error) {
	if store == nil || opts.Client == nil {
		return nil, errors.New("status: NewSyncer needs a store and Options.Client")
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = DefaultSyncPeriod
	}
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	return &Syncer{store: store, client: opts.Client, nodeName: opts.NodeName, safety: opts.PodDeletionSafety,
		syncPeriod: opts.SyncPeriod, logger: opts.Logger, updated: opts.Updated}, nil
}

// Start syncs the pod statuses with the API server in the background until ctx
// ends (Wait waits for it).
func (s *Syncer) Start(ctx context.Context) error {
	s.loops.Go(s.logger, "pod status sync", func() { s.run(ctx) })
	return nil
}

// Wait returns once the loop Start began has ended.
func (s *Syncer) Wait() { s.loops.Wait() }

// run publishes the store to the API server until ctx ends: each status
// change is patched as soon as the loop is free (changes made meanwhile
// coalesce, the latest version wins), and every SyncPeriod all statuses are
// checked again, so that failed writes are retried, static pods' statuses
// reach mirror pods created later, and pods being deleted are removed once
// their status is final and their resources are reclaimed.
func (s *Syncer) run(ctx context.Context) {
	s.logger.Info("syncing pod statuses with the API server", zap.Duration("period", s.syncPeriod))
	ticker := time.NewTicker(s.syncPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.store.changed:
			s.syncBatch(ctx, false)
		case <-ticker.C:
			s.syncBatch(ctx, true)
		}
	}
}

// syncBatch syncs the statuses that need it (all: the full resync) and
// returns how many it tried.
func (s *Syncer) syncBatch(ctx context.Context, all bool) int {
	batch := s.pending(all)
	for _, p := range batch {
		if ctx.Err() != nil {
			break
		}
		s.syncPod(ctx, p)
	}
	return len(batch)
}

// pending picks the pods to sync. The store is only read under the lock; the
// deletion-safety provider is asked outside it (it may call back into the
// store).
func (s *Syncer) pending(all bool) []podSync {
	s.store.mu.RLock()
	snap := make([]podSync, 0, len(s.store.pods))
	for uid, e := range s.store.pods {
		a, ok := s.store.acked[uid]
		snap = append(snap, podSync{uid: uid, e: e, ack: a, acked: ok})
	}
	s.store.mu.RUnlock()
	out := snap[:0]
	for _, p := range snap {
		if s.needsSync(p, all) {
			out = append(out, p)
		}
	}
	return out
}

// needsSync: a version the API has not acknowledged always; on the full
// resync also static pods (their mirror pod may be new), pods ready for their
// final deletion, and pods whose API status (as last seen by the kubelet)
// differs from what the kubelet would write.
func (s *Syncer) needsSync(p podSync, all bool) bool {
	switch {
	case p.ack.gone:
		return false
	case !p.acked || p.ack.version < p.e.version:
		return true
	case !all:
		return false
	case p.static():
		return true
	case s.mayDelete(p.e.pod, p.e.status.Phase, p):
		return true
	}
	return s.needsReconcile(p.e)
}

// needsReconcile reports whether patching the pod's API status, as carried by
// the pod object the kubelet last passed in, would change it.
func (s *Syncer) needsReconcile(e *entry) bool {
	merged := mergePodStatus(e.pod, e.pod.Status, e.status, metav1.NewTime(s.store.clock.Now()), s.mayBeRunning(e.pod), s.store.rules)
	_, unchanged, err := statusPatch(e.pod.UID, e.pod.Status, merged)
	return err != nil || !unchanged
}

// mayBeRunning reports whether the pod may still have running containers,
// so that its terminal phase is held back.
func (s *Syncer) mayBeRunning(pod *v1.Pod) bool {
	return s.safety != nil && s.safety.PodCouldHaveRunningContainers(pod)
}

// mayDelete reports whether pod may be removed from the API server: it is
// being deleted, it is not a mirror pod (those belong to the kubelet's mirror
// pod logic), its phase is terminal (the API's after a patch), the kubelet's
// status is final (TerminatePod ran) and its resources are reclaimed.
func (s *Syncer) mayDelete(pod *v1.Pod, phase v1.PodPhase, p podSync) bool {
	if pod.DeletionTimestamp == nil || p.static() || IsMirrorPod(pod) {
		return false
	}
	if !IsTerminal(phase) || !p.e.finished {
		return false
	}
	return s.safety == nil || s.safety.PodResourcesAreReclaimed(pod)
}

// syncPod writes one status, retrying at once on conflicts (a concurrent
// writer, or the pod replaced under the UID precondition); other errors wait
// for the next pass.
func (s *Syncer) syncPod(ctx context.Context, p podSync) {
	log := s.logger.With(zap.String("pod", p.e.pod.Namespace+"/"+p.e.pod.Name),
		zap.String("podUID", string(p.uid)), zap.Uint64("version", p.e.version))
	err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, func() error {
		return s.syncPodOnce(ctx, p, log)
	})
	if err != nil {
		log.Info("pod status not synced; retrying at the next pass", zap.Error(err))
	}
}

// syncPodOnce: GET the API pod, check it is the one this status belongs to,
// merge, patch when different, record the acknowledgement, then delete the pod
// when its time has come.
func (s *Syncer) syncPodOnce(ctx context.Context, p podSync, log *zap.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	pods := s.client.CoreV1().Pods(p.e.pod.Namespace)
	apiPod, err := pods.Get(ctx, p.e.pod.Name, metav1.GetOptions{})
	switch {
	case (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) && p.static():
		// The Node authorizer answers Forbidden for pods not bound to the
		// node, including ones that do not exist.
		log.Debug("static pod has no mirror pod yet", zap.Error(err))
		return nil
	case apierrors.IsNotFound(err):
		log.Debug("pod no longer exists in the API")
		s.recordAck(p, ack{version: p.e.version, gone: true})
		return nil
	case err != nil:
		return fmt.Errorf("get pod: %w", err)
	}
	if ok, gone := s.isTarget(p, apiPod, log); !ok {
		if gone {
			s.recordAck(p, ack{version: p.e.version, gone: true})
		}
		return nil
	}
	merged := mergePodStatus(apiPod, apiPod.Status, p.e.status, metav1.NewTime(s.store.clock.Now()), s.mayBeRunning(apiPod), s.store.rules)
	updated, unchanged, err := patchPodStatus(ctx, s.client, apiPod, merged)
	if err != nil {
		return err
	}
	if !unchanged {
		log.Debug("pod status patched", zap.String("phase", string(updated.Status.Phase)))
		apiPod = updated
		if s.updated != nil {
			s.updated.RecordStatusUpdated(updated)
		}
	}
	s.recordAck(p, ack{version: p.e.version, apiUID: apiPod.UID})
	if !s.mayDelete(apiPod, apiPod.Status.Phase, p) {
		return nil
	}
	grace := int64(0)
	err = pods.Delete(ctx, apiPod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &grace,
		Preconditions:      metav1.NewUIDPreconditions(string(apiPod.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete terminated pod: %w", err)
	}
	log.Info("pod terminated and removed from the API server")
	s.recordAck(p, ack{version: p.e.version, apiUID: apiPod.UID, gone: true})
	return nil
}

// isTarget reports whether apiPod is where p's status goes: the pod itself
// (same UID, bound to this node) or, for a static pod, its mirror pod. gone
// says the API object belongs to another pod for good.
func (s *Syncer) isTarget(p podSync, apiPod *v1.Pod, log *zap.Logger) (ok, gone bool) {
	if p.static() {
		if !MirrorMatchesStatic(apiPod, p.e.pod) {
			log.Debug("API pod is not the static pod's mirror pod (yet)", zap.String("apiUID", string(apiPod.UID)))
			return false, false
		}
		return true, false
	}
	if apiPod.UID != p.uid {
		log.Info("pod was deleted and recreated; not writing the old pod's status", zap.String("apiUID", string(apiPod.UID)))
		return false, true
	}
	if s.nodeName != "" && apiPod.Spec.NodeName != s.nodeName {
		log.Warn("pod is bound to another node; not writing its status", zap.String("node", apiPod.Spec.NodeName))
		return false, true
	}
	return true, false
}

// recordAck stores a unless the pod was forgotten meanwhile.
func (s *Syncer) recordAck(p podSync, a ack) {
	s.store.mu.Lock()
	defer s.store.mu.Unlock()
	if _, ok := s.store.pods[p.uid]; !ok {
		return
	}
	if prev, ok := s.store.acked[p.uid]; ok && prev.version > a.version {
		return
	}
	s.store.acked[p.uid] = a
}
