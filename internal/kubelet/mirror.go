package kubelet

import (
	"context"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/podmanager"
	"github.com/kubelet-dockershim/kubelet/internal/kubelet/status"
)

// mirrorKeeper keeps one API mirror pod per running static pod (upstream
// SyncPod's mirror step and HandlePodCleanups' orphaned mirror removal).
type mirrorKeeper struct {
	client MirrorClient
	pods   *podmanager.Manager
	logger *zap.Logger
}

// sync makes the static pod's mirror current: an outdated or deleting mirror
// is deleted, a missing one created. Failures are logged; the next sync
// retries.
func (m *mirrorKeeper) sync(ctx context.Context, pod *v1.Pod) {
	if m == nil || m.client == nil || !kubecontainer.IsStaticPod(pod) {
		return
	}
	mirror, ok := m.pods.Mirror(pod.Namespace, pod.Name)
	if ok && (mirror.DeletionTimestamp != nil || !status.MirrorMatchesStatic(mirror, pod)) {
		m.logger.Info("Deleting an outdated mirror pod", zap.String("pod", podRef(pod)))
		uid := mirror.UID
		if _, err := m.client.DeleteMirrorPod(ctx, mirror.Namespace, mirror.Name, &uid); err != nil {
			m.logger.Error("Deleting mirror pod failed", zap.String("pod", podRef(pod)), zap.Error(err))
			return
		}
		ok = false
	}
	if ok {
		return
	}
	if err := m.client.CreateMirrorPod(ctx, pod); err != nil {
		m.logger.Info("Creating mirror pod failed (retried at the next sync)", zap.String("pod", podRef(pod)), zap.Error(err))
		return
	}
	m.logger.Info("Created mirror pod", zap.String("pod", podRef(pod)))
}

// cleanup deletes mirror pods whose static pod is gone, unless a worker still
// runs a pod of that name (upstream: orphaned mirror pods are removed once the
// static pod is no longer running).
func (m *mirrorKeeper) cleanup(ctx context.Context, stillRunning func(namespace, name string) bool) {
	if m == nil || m.client == nil {
		return
	}
	for _, mirror := range m.pods.AllMirrors() {
		if static, ok := m.pods.ByFullName(mirror.Namespace, mirror.Name); ok && kubecontainer.IsStaticPod(static) && status.MirrorMatchesStatic(mirror, static) {
			continue
		}
		if stillRunning(mirror.Namespace, mirror.Name) {
			continue
		}
		uid := mirror.UID
		m.logger.Info("Deleting an orphaned mirror pod", zap.String("pod", podRef(mirror)))
		if _, err := m.client.DeleteMirrorPod(ctx, mirror.Namespace, mirror.Name, &uid); err != nil {
			m.logger.Error("Deleting orphaned mirror pod failed", zap.String("pod", podRef(mirror)), zap.Error(err))
		}
	}
}

// pullSecrets reads the pod's image pull secrets; missing ones are reported
// with upstream's FailedToRetrieveImagePullSecret event and skipped.
func (s *podSyncer) pullSecrets(ctx context.Context, pod *v1.Pod) []v1.Secret {
	if s.secrets == nil || len(pod.Spec.ImagePullSecrets) == 0 {
		return nil
	}
	var out []v1.Secret
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		sec, err := s.secrets.GetSecret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			s.recorder.Eventf(pod, v1.EventTypeWarning, "FailedToRetrieveImagePullSecret",
				"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", ref.Name)
			continue
		}
		out = append(out, *sec)
	}
	return out
}
