package status

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
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

// Run publishes the store to the API server until ctx ends: each status
// change is patched as soon as the loop is free (changes made meanwhile
// coalesce, the latest version wins), and every SyncPeriod all statuses are
// checked again, so that failed writes are retried, static pods' statuses
// reach mirror pods created later, and pods being deleted are removed once
// their status is final and their resources are reclaimed. It returns at once
// without a client. Call it once, in its own goroutine.
func (m *Manager) Run(ctx context.Context) {
	if m.client == nil {
		m.logger.Info("no API client: pod statuses stay local")
		return
	}
	m.logger.Info("syncing pod statuses with the API server", zap.Duration("period", m.syncPeriod))
	ticker := time.NewTicker(m.syncPeriod)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
			m.syncBatch(ctx, false)
		case <-ticker.C:
			m.syncBatch(ctx, true)
		}
	}
}

// syncBatch syncs the statuses that need it (all: the full resync) and
// returns how many it tried.
func (m *Manager) syncBatch(ctx context.Context, all bool) int {
	batch := m.pending(all)
	for _, p := range batch {
		if ctx.Err() != nil {
			break
		}
		m.syncPod(ctx, p)
	}
	return len(batch)
}

// pending picks the pods to sync. The store is only read under the lock; the
// deletion-safety provider is asked outside it (it may call back into the
// store).
func (m *Manager) pending(all bool) []podSync {
	m.mu.RLock()
	snap := make([]podSync, 0, len(m.pods))
	for uid, e := range m.pods {
		a, ok := m.acked[uid]
		snap = append(snap, podSync{uid: uid, e: e, ack: a, acked: ok})
	}
	m.mu.RUnlock()
	out := snap[:0]
	for _, p := range snap {
		if m.needsSync(p, all) {
			out = append(out, p)
		}
	}
	return out
}

// needsSync: a version the API has not acknowledged always; on the full
// resync also static pods (their mirror pod may be new), pods ready for their
// final deletion, and pods whose API status (as last seen by the kubelet)
// differs from what the kubelet would write.
func (m *Manager) needsSync(p podSync, all bool) bool {
	switch {
	case p.ack.gone:
		return false
	case !p.acked || p.ack.version < p.e.version:
		return true
	case !all:
		return false
	case p.static():
		return true
	case m.mayDelete(p.e.pod, p.e.status.Phase, p):
		return true
	}
	return m.needsReconcile(p.e)
}

// needsReconcile reports whether patching the pod's API status, as carried by
// the pod object the kubelet last passed in, would change it.
func (m *Manager) needsReconcile(e *entry) bool {
	merged := mergePodStatus(e.pod, e.pod.Status, e.status, metav1.NewTime(m.clock.Now()))
	_, unchanged, err := statusPatch(e.pod.UID, e.pod.Status, merged)
	return err != nil || !unchanged
}

// mayDelete reports whether pod may be removed from the API server: it is
// being deleted, it is not a mirror pod (those belong to the kubelet's mirror
// pod logic), its phase is terminal (the API's after a patch), the kubelet's
// status is final (TerminatePod ran) and its resources are reclaimed.
func (m *Manager) mayDelete(pod *v1.Pod, phase v1.PodPhase, p podSync) bool {
	if pod.DeletionTimestamp == nil || p.static() || IsMirrorPod(pod) {
		return false
	}
	if !IsTerminal(phase) || !p.e.finished {
		return false
	}
	return m.safety == nil || m.safety.PodResourcesAreReclaimed(pod)
}

// syncPod writes one status, retrying at once on conflicts (a concurrent
// writer, or the pod replaced under the UID precondition); other errors wait
// for the next pass.
func (m *Manager) syncPod(ctx context.Context, p podSync) {
	log := m.logger.With(zap.String("pod", p.e.pod.Namespace+"/"+p.e.pod.Name),
		zap.String("podUID", string(p.uid)), zap.Uint64("version", p.e.version))
	err := retry.OnError(retry.DefaultRetry, apierrors.IsConflict, func() error {
		return m.syncPodOnce(ctx, p, log)
	})
	if err != nil {
		log.Info("pod status not synced; retrying at the next pass", zap.Error(err))
	}
}

// syncPodOnce: GET the API pod, check it is the one this status belongs to,
// merge, patch when different, record the acknowledgement, then delete the pod
// when its time has come.
func (m *Manager) syncPodOnce(ctx context.Context, p podSync, log *zap.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	pods := m.client.CoreV1().Pods(p.e.pod.Namespace)
	apiPod, err := pods.Get(ctx, p.e.pod.Name, metav1.GetOptions{})
	switch {
	case (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)) && p.static():
		// The Node authorizer answers Forbidden for pods not bound to the
		// node, including ones that do not exist.
		log.Debug("static pod has no mirror pod yet", zap.Error(err))
		return nil
	case apierrors.IsNotFound(err):
		log.Debug("pod no longer exists in the API")
		m.recordAck(p, ack{version: p.e.version, gone: true})
		return nil
	case err != nil:
		return fmt.Errorf("get pod: %w", err)
	}
	if ok, gone := m.isTarget(p, apiPod, log); !ok {
		if gone {
			m.recordAck(p, ack{version: p.e.version, gone: true})
		}
		return nil
	}
	merged := mergePodStatus(apiPod, apiPod.Status, p.e.status, metav1.NewTime(m.clock.Now()))
	updated, unchanged, err := patchPodStatus(ctx, m.client, apiPod, merged)
	if err != nil {
		return err
	}
	if !unchanged {
		log.Debug("pod status patched", zap.String("phase", string(updated.Status.Phase)))
		apiPod = updated
	}
	m.recordAck(p, ack{version: p.e.version, apiUID: apiPod.UID})
	if !m.mayDelete(apiPod, apiPod.Status.Phase, p) {
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
	m.recordAck(p, ack{version: p.e.version, apiUID: apiPod.UID, gone: true})
	return nil
}

// isTarget reports whether apiPod is where p's status goes: the pod itself
// (same UID, bound to this node) or, for a static pod, its mirror pod. gone
// says the API object belongs to another pod for good.
func (m *Manager) isTarget(p podSync, apiPod *v1.Pod, log *zap.Logger) (ok, gone bool) {
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
	if m.nodeName != "" && apiPod.Spec.NodeName != m.nodeName {
		log.Warn("pod is bound to another node; not writing its status", zap.String("node", apiPod.Spec.NodeName))
		return false, true
	}
	return true, false
}

// recordAck stores a unless the pod was forgotten meanwhile.
func (m *Manager) recordAck(p podSync, a ack) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.pods[p.uid]; !ok {
		return
	}
	if prev, ok := m.acked[p.uid]; ok && prev.version > a.version {
		return
	}
	m.acked[p.uid] = a
}
