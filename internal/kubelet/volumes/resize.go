package volumes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes/csi"
)

// ClaimStatus writes claims' status: the resize status and capacity a node
// expansion changes (internal/kubelet/apiobjects).
type ClaimStatus interface {
	PatchPersistentVolumeClaimStatus(ctx context.Context, namespace, name string, patch []byte) (*v1.PersistentVolumeClaim, error)
}

// annotationNodeExpansionNotRequired on a claim says its ReadWriteMany
// volume needs no expansion on each node (upstream's).
const annotationNodeExpansionNotRequired = "volume.kubernetes.io/node-expansion-not-required"

// Event reasons of a node expansion (upstream's).
const (
	eventResizeSuccess = "FileSystemResizeSuccess"
	eventResizeFailed  = "VolumeResizeFailed"
)

// resizeConditions are the claim conditions of a resize, which a finished
// node expansion clears (upstream's knownResizeConditions).
var resizeConditions = map[v1.PersistentVolumeClaimConditionType]bool{
	v1.PersistentVolumeClaimFileSystemResizePending: true,
	v1.PersistentVolumeClaimResizing:                true,
	v1.PersistentVolumeClaimControllerResizeError:   true,
	v1.PersistentVolumeClaimNodeResizeError:         true,
}

// expandClaim grows a published CSI volume when its claim was resized, as
// upstream's node expander does for a mounted volume (at its mount and at
// each later sync of the pod):
//  1. the PV's capacity is the new size; the claim's status capacity the
//     size the node last reached;
//  2. only a claim whose storage resize status is NodeResizePending (or
//     NodeResizeInProgress: a kubelet stopped midway) is expanded; it is
//     marked NodeResizeInProgress first;
//  3. NodeExpandVolume on the pod's mount (filesystem) or publish file
//     (block) with the staging path;
//  4. on success the claim's status capacity becomes the new size, its
//     resize status and resize conditions are cleared, and the pod and the
//     claim get a FileSystemResizeSuccess event; a size the driver calls
//     infeasible marks the claim NodeResizeInfeasible with a NodeResizeError
//     condition; other failures are a VolumeResizeFailed event on the pod,
//     and the next sync tries again.
//
// pvc and pv are the latest read; the volume stays in use whatever happens.
func (m *Manager) expandClaim(ctx context.Context, pod *v1.Pod, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, e csi.Expansion) {
	if m.claimStatus == nil || pv.Spec.CSI == nil {
		return
	}
	newSize, ok := pv.Spec.Capacity[v1.ResourceStorage]
	if !ok {
		return
	}
	// One expansion of a volume at a time on this node (upstream's
	// operation executor runs one operation per volume): of two pods of the
	// volume syncing at once, the second finds it done.
	unlock, err := m.expansions.Lock(ctx, pv.Name)
	if err != nil {
		return
	}
	defer unlock()
	statusCap := pvc.Status.Capacity[v1.ResourceStorage]
	resizeStatus := pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage]
	// The volume has the claim's status capacity when first seen here
	// (upstream's InitializeClaimSize), the PV's for a claim without one.
	mountSize := statusCap
	if mountSize.IsZero() {
		mountSize = newSize
	}
	nodeSize, mountedBefore := m.recordNodeSize(pv.Name, mountSize)
	if mountedBefore && nodeSize.Cmp(newSize) >= 0 {
		return // expanded to this size on this node already
	}
	if statusCap.Cmp(newSize) >= 0 && resizeStatus == "" {
		// The claim is done (upstream's pvcAlreadyUpdated). A ReadWriteMany
		// volume another node expanded is expanded on this node too, unless
		// the claim says no node needs it.
		if mountedBefore && nodeSize.Cmp(newSize) < 0 && slices.Contains(pvc.Spec.AccessModes, v1.ReadWriteMany) &&
			!metav1.HasAnnotation(pvc.ObjectMeta, annotationNodeExpansionNotRequired) {
			m.expandOnNode(ctx, pod, pvc, pv, newSize, e)
		}
		return
	}
	if resizeStatus != v1.PersistentVolumeClaimNodeResizePending && resizeStatus != v1.PersistentVolumeClaimNodeResizeInProgress {
		return // the controller has not finished (or the node gave up)
	}
	if m.expansionSkipped(pv.Name, newSize.String()) {
		return // given up on at this size: read-only, or in use
	}
	if e.Volume.ReadOnly {
		m.skipExpansion(pv.Name, newSize.String())
		m.resizeEvent(pod, pvc, v1.EventTypeWarning, "FileSystemResizeFailed",
			fmt.Sprintf("MountVolume.NodeExpandVolume failed for volume %q requested read-only file system", pv.Name))
		return
	}
	logger := m.logger.With(zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("pv", pv.Name),
		zap.String("claim", pvc.Namespace+"/"+pvc.Name), zap.String("newSize", newSize.String()))
	if resizeStatus != v1.PersistentVolumeClaimNodeResizeInProgress {
		next := pvc.DeepCopy()
		setResizeStatus(next, v1.PersistentVolumeClaimNodeResizeInProgress)
		if pvc, err = m.patchClaimStatus(ctx, pvc, next, true); err != nil {
			logger.Error("MountVolume.NodeExpandVolume failed to mark node expansion in progress", zap.Error(err))
			return
		}
	}
	if e, ok = m.withExpandSecrets(ctx, pod, pv, newSize, e); !ok {
		return
	}
	if err = m.csi.NodeExpand(ctx, e); err != nil {
		m.expansionFailed(ctx, logger, pod, pvc, pv.Name, newSize, err)
		return
	}
	m.expanded(pod, pvc, pv.Name, newSize)
	logger.Info("NodeExpandVolume succeeded")
	next := pvc.DeepCopy()
	if next.Status.Capacity == nil {
		next.Status.Capacity = v1.ResourceList{}
	}
	next.Status.Capacity[v1.ResourceStorage] = newSize
	delete(next.Status.AllocatedResourceStatuses, v1.ResourceStorage)
	if len(next.Status.AllocatedResourceStatuses) == 0 {
		next.Status.AllocatedResourceStatuses = nil
	}
	var kept []v1.PersistentVolumeClaimCondition
	for _, c := range next.Status.Conditions {
		if !resizeConditions[c.Type] {
			kept = append(kept, c)
		}
	}
	next.Status.Conditions = kept
	if _, err := m.patchClaimStatus(ctx, pvc, next, true); err != nil {
		logger.Error("MountVolume.NodeExpandVolume update pvc status failed", zap.Error(err))
	}
}

// expandOnNode expands on this node a ReadWriteMany volume whose claim
// another node's expansion already finished: NodeExpandVolume only, the
// claim is only written on failure (upstream's node expander with
// pvcAlreadyUpdated). A driver without node expansion needs none here; a
// failure marks the claim as the claim's own expansion does; a volume in
// use is not tried again at this size; other failures are an event and tried
// again at the next sync.
func (m *Manager) expandOnNode(ctx context.Context, pod *v1.Pod, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, newSize resource.Quantity, e csi.Expansion) {
	if m.expansionSkipped(pv.Name, newSize.String()) {
		return
	}
	if e.Volume.ReadOnly {
		m.skipExpansion(pv.Name, newSize.String())
		return
	}
	logger := m.logger.With(zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("pv", pv.Name),
		zap.String("claim", pvc.Namespace+"/"+pvc.Name), zap.String("newSize", newSize.String()))
	e, ok := m.withExpandSecrets(ctx, pod, pv, newSize, e)
	if !ok {
		return
	}
	switch err := m.csi.NodeExpand(ctx, e); {
	case err == nil:
		m.expanded(pod, pvc, pv.Name, newSize)
		logger.Info("NodeExpandVolume of a ReadWriteMany volume succeeded on this node")
	case errors.Is(err, csi.ErrExpandUnsupported):
		m.setNodeSize(pv.Name, newSize) // nothing to do on this node
	default:
		m.expansionFailed(ctx, logger, pod, pvc, pv.Name, newSize, err)
	}
}

// withExpandSecrets returns e for newSize with the PV's node expansion
// secret; false (and an event) when the secret cannot be read.
func (m *Manager) withExpandSecrets(ctx context.Context, pod *v1.Pod, pv *v1.PersistentVolume, newSize resource.Quantity, e csi.Expansion) (csi.Expansion, bool) {
	e.NewSize = newSize.Value()
	if ref := pv.Spec.CSI.NodeExpandSecretRef; ref != nil {
		var err error
		if e.Secrets, err = m.secretData(ctx, ref); err != nil {
			m.resizeEvent(pod, nil, v1.EventTypeWarning, eventResizeFailed, expandFailedMessage(pv.Name, err))
			return e, false
		}
	}
	return e, true
}

// expansionFailed reports a failed NodeExpandVolume as upstream's node
// expander does: the claim gets a NodeResizeError condition (and
// NodeResizeInfeasible for a size the driver can never reach); a volume in
// use is not tried again at this size and makes no event; other failures
// are an event and tried at the next sync.
func (m *Manager) expansionFailed(ctx context.Context, logger *zap.Logger, pod *v1.Pod, pvc *v1.PersistentVolumeClaim, pv string, newSize resource.Quantity, err error) {
	m.markExpansionFailed(ctx, logger, pvc, err)
	logger.Error("NodeExpandVolume failed", zap.Error(err))
	if errors.Is(err, csi.ErrExpandInUse) {
		m.skipExpansion(pv, newSize.String())
		return
	}
	m.resizeEvent(pod, nil, v1.EventTypeWarning, eventResizeFailed, expandFailedMessage(pv, err))
}

// markExpansionFailed writes a node expansion's failure on the claim, as
// upstream's MarkNodeExpansionInfeasible (a size the driver can never reach:
// NodeResizeInfeasible) and MarkNodeExpansionFailedCondition do: a
// NodeResizeError condition, no resourceVersion check.
func (m *Manager) markExpansionFailed(ctx context.Context, logger *zap.Logger, pvc *v1.PersistentVolumeClaim, err error) {
	next := pvc.DeepCopy()
	if errors.Is(err, csi.ErrExpandInfeasible) {
		setResizeStatus(next, v1.PersistentVolumeClaimNodeResizeInfeasible)
	}
	setResizeError(next, err)
	if _, perr := m.patchClaimStatus(ctx, pvc, next, false); perr != nil {
		logger.Error("MountVolume.NodeExpandVolume failed to mark node expansion as failed", zap.Error(perr))
	}
}

// expanded records a node expansion that succeeded: the volume's size on
// this node, and upstream's FileSystemResizeSuccess event on the pod and the
// claim.
func (m *Manager) expanded(pod *v1.Pod, pvc *v1.PersistentVolumeClaim, pv string, size resource.Quantity) {
	m.setNodeSize(pv, size)
	msg := fmt.Sprintf("MountVolume.NodeExpandVolume succeeded for volume %q %s", pv, pod.Spec.NodeName)
	m.resizeEvent(pod, pvc, v1.EventTypeNormal, eventResizeSuccess, msg)
}

// recordNodeSize returns the size pv has on this node and whether it was
// mounted here before; the first time, mountSize is recorded.
func (m *Manager) recordNodeSize(pv string, mountSize resource.Quantity) (resource.Quantity, bool) {
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	if size, ok := m.nodeSize[pv]; ok {
		return size, true
	}
	m.setNodeSizeLocked(pv, mountSize)
	return mountSize, false
}

func (m *Manager) setNodeSize(pv string, size resource.Quantity) {
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	m.setNodeSizeLocked(pv, size)
}

// setNodeSizeLocked records pv's size on this node (claimMu held).
func (m *Manager) setNodeSizeLocked(pv string, size resource.Quantity) {
	if m.nodeSize == nil {
		m.nodeSize = map[string]resource.Quantity{}
	}
	m.nodeSize[pv] = size
}

// expansionSkipped says whether the expansion of pv to size was given up
// on; skipExpansion records that (until another size is asked).
func (m *Manager) expansionSkipped(pv, size string) bool {
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	return m.expandSkip[pv] == size
}

func (m *Manager) skipExpansion(pv, size string) {
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	if m.expandSkip == nil {
		m.expandSkip = map[string]string{}
	}
	m.expandSkip[pv] = size
}

func expandFailedMessage(pv string, err error) string {
	return fmt.Sprintf("NodeExpandVolume.NodeExpandVolume failed for volume %q : %v", pv, err)
}

func setResizeStatus(pvc *v1.PersistentVolumeClaim, s v1.ClaimResourceStatus) {
	if pvc.Status.AllocatedResourceStatuses == nil {
		pvc.Status.AllocatedResourceStatuses = map[v1.ResourceName]v1.ClaimResourceStatus{}
	}
	pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] = s
}

// setResizeError puts upstream's NodeResizeError condition on the claim
// (replacing an older one; the other conditions are kept).
func setResizeError(pvc *v1.PersistentVolumeClaim, err error) {
	var kept []v1.PersistentVolumeClaimCondition
	for _, c := range pvc.Status.Conditions {
		if c.Type != v1.PersistentVolumeClaimNodeResizeError {
			kept = append(kept, c)
		}
	}
	pvc.Status.Conditions = append(kept, v1.PersistentVolumeClaimCondition{Type: v1.PersistentVolumeClaimNodeResizeError,
		Status: v1.ConditionTrue, LastTransitionTime: metav1.Now(), Message: fmt.Sprintf("failed to expand pvc with %v", err)})
}

// patchClaimStatus sends the difference between old and next as a strategic
// merge patch of the claim's status, with old's resourceVersion when
// checkVersion (a claim changed meanwhile is a conflict), as upstream's
// PatchPVCStatus (its failure markers send none).
func (m *Manager) patchClaimStatus(ctx context.Context, old, next *v1.PersistentVolumeClaim, checkVersion bool) (*v1.PersistentVolumeClaim, error) {
	oldData, err := json.Marshal(old)
	if err != nil {
		return old, err
	}
	newData, err := json.Marshal(next)
	if err != nil {
		return old, err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, old)
	if err != nil {
		return old, fmt.Errorf("failed to create 2 way merge patch: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(patch, &obj); err != nil {
		return old, err
	}
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	if checkVersion {
		meta["resourceVersion"] = old.ResourceVersion
		obj["metadata"] = meta
	}
	if patch, err = json.Marshal(obj); err != nil {
		return old, err
	}
	updated, err := m.claimStatus.PatchPersistentVolumeClaimStatus(ctx, old.Namespace, old.Name, patch)
	if err != nil {
		return old, fmt.Errorf("patchPVCStatus failed to patch PVC %q: %w", old.Name, err)
	}
	return updated, nil
}

// resizeEvent records an event on the pod and, when given, the claim.
func (m *Manager) resizeEvent(pod *v1.Pod, pvc *v1.PersistentVolumeClaim, typ, reason, msg string) {
	if m.recorder == nil {
		return
	}
	m.recorder.Eventf(pod, typ, reason, "%s", msg)
	if pvc != nil {
		m.recorder.Eventf(pvc, typ, reason, "%s", msg)
	}
}
