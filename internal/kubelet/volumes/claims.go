package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes/csi"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/component-helpers/storage/ephemeral"
)

// LocalVolumePluginDir is where local persistent volumes are bind-mounted
// under <pod>/volumes, one directory per PV name (upstream's local-volume
// plugin).
const LocalVolumePluginDir = "kubernetes.io~local-volume"

// pvcProtectionFinalizer keeps a claim in use from being removed; a claim
// being deleted without it must not be started on (upstream's rule).
const pvcProtectionFinalizer = "kubernetes.io/pvc-protection"

// ClaimObjects reads the claims and persistent volumes that
// persistentVolumeClaim and generic ephemeral volumes resolve to
// (internal/kubelet/apiobjects; the Node authorizer lets a node read those
// of its own pods). Errors are the API's, unwrapped.
type ClaimObjects interface {
	GetPersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error)
	GetPersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error)
}

// boundClaim is a pod volume resolved to its claim and the PV bound to it,
// read from the API before the Manager's lock is taken.
type boundClaim struct {
	pvc      *v1.PersistentVolumeClaim
	pv       *v1.PersistentVolume
	readOnly bool // the pod's claim reference says readOnly
	err      error
	// latest are the claim and PV read again at a later sync of a CSI
	// claim (a resize shows there); nil: pvc and pv are the latest.
	latestClaim *v1.PersistentVolumeClaim
	latestVol   *v1.PersistentVolume
}

func (bc *boundClaim) latestPVC() *v1.PersistentVolumeClaim {
	if bc.latestClaim != nil {
		return bc.latestClaim
	}
	return bc.pvc
}

func (bc *boundClaim) latestPV() *v1.PersistentVolume {
	if bc.latestVol != nil {
		return bc.latestVol
	}
	return bc.pv
}

// ClaimVolume is a mounted volume of a pod backed by a persistent volume
// claim.
type ClaimVolume struct {
	// Name is the pod's volume name.
	Name string
	// Claim is the claim's namespace and name.
	Claim k8stypes.NamespacedName
	// PV is the persistent volume's name.
	PV string
	// Path is where the volume is mounted for the pod's containers, when its
	// plugin reports usage: local volumes (statfs of it) and CSI volumes
	// (NodeGetVolumeStats). "" for hostPath volumes, which report none
	// (upstream's hostPath plugin has no metrics).
	Path string
	// CSIDriver and CSIHandle name a CSI volume, measured by its driver.
	CSIDriver, CSIHandle string
}

// collectClaims resolves every persistentVolumeClaim and generic ephemeral
// volume of the pod to its bound PV (once: later syncs reuse it) with
// upstream's checks and messages:
// the claim must exist, not be being deleted without its protection
// finalizer, be Bound to a PV whose claimRef points back at it; a generic
// ephemeral volume's claim (<pod>-<volume>) must be controlled by the pod.
// nil when the Manager has no Claims.
func (m *Manager) collectClaims(ctx context.Context, pod *v1.Pod) map[string]*boundClaim {
	if m.claims == nil {
		return nil
	}
	var out map[string]*boundClaim
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		ref, isEphemeral := vol.PersistentVolumeClaim, false
		if ref == nil && vol.Ephemeral != nil {
			ref, isEphemeral = &v1.PersistentVolumeClaimVolumeSource{ClaimName: ephemeral.VolumeClaimName(pod, vol)}, true
		}
		if ref == nil {
			continue
		}
		if out == nil {
			out = map[string]*boundClaim{}
		}
		if bc := m.resolvedClaim(pod.UID, vol.Name); bc != nil {
			out[vol.Name] = m.refreshCSIClaim(ctx, bc) // bound once: a running pod's claim does not move
			continue
		}
		bc := &boundClaim{readOnly: ref.ReadOnly}
		out[vol.Name] = bc
		processing := func(err error) error {
			return fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, ref.ClaimName, err)
		}
		if bc.pvc, bc.err = m.boundClaim(ctx, pod.Namespace, ref.ClaimName); bc.err != nil {
			bc.err = processing(bc.err)
			continue
		}
		if isEphemeral {
			if bc.err = ephemeral.VolumeIsForPod(pod, bc.pvc); bc.err != nil {
				continue
			}
		}
		if bc.pv, bc.err = m.boundVolume(ctx, bc.pvc); bc.err != nil {
			bc.err = processing(bc.err)
			continue
		}
		m.rememberResolved(pod.UID, vol.Name, bc)
	}
	return out
}

// refreshCSIClaim reads a resolved CSI claim and its PV again, so that a
// resize of the claim reaches the node (upstream re-reads them at each sync
// of the pod); a read error keeps the last ones. Other claims are returned
// as they are.
func (m *Manager) refreshCSIClaim(ctx context.Context, bc *boundClaim) *boundClaim {
	if m.claimStatus == nil || bc.pv == nil || bc.pv.Spec.CSI == nil {
		return bc
	}
	cur := *bc
	if pvc, err := m.claims.GetPersistentVolumeClaim(ctx, bc.pvc.Namespace, bc.pvc.Name); err == nil && pvc.UID == bc.pvc.UID {
		cur.latestClaim = pvc
	}
	if pv, err := m.claims.GetPersistentVolume(ctx, bc.pv.Name); err == nil && pv.UID == bc.pv.UID {
		cur.latestVol = pv
	}
	return &cur
}

// resolvedClaim is the claim and PV a pod volume was resolved to before.
func (m *Manager) resolvedClaim(uid k8stypes.UID, name string) *boundClaim {
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	return m.resolved[uid][name]
}

func (m *Manager) rememberResolved(uid k8stypes.UID, name string, bc *boundClaim) {
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	if m.resolved == nil {
		m.resolved = map[k8stypes.UID]map[string]*boundClaim{}
	}
	if m.resolved[uid] == nil {
		m.resolved[uid] = map[string]*boundClaim{}
	}
	m.resolved[uid][name] = bc
}

// boundClaim reads a claim and checks that a pod may start on it.
func (m *Manager) boundClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error) {
	pvc, err := m.claims.GetPersistentVolumeClaim(ctx, namespace, name)
	if err != nil || pvc == nil {
		return nil, fmt.Errorf("failed to fetch PVC from API server: %w", err)
	}
	switch {
	case pvc.DeletionTimestamp != nil && !slices.Contains(pvc.Finalizers, pvcProtectionFinalizer):
		return nil, errors.New("PVC is being deleted")
	case pvc.Status.Phase != v1.ClaimBound:
		return nil, errors.New("PVC is not bound")
	case pvc.Spec.VolumeName == "":
		return nil, errors.New("PVC has empty pvc.Spec.VolumeName")
	}
	return pvc, nil
}

// boundVolume reads the PV a claim is bound to and checks it is bound back.
func (m *Manager) boundVolume(ctx context.Context, pvc *v1.PersistentVolumeClaim) (*v1.PersistentVolume, error) {
	name := pvc.Spec.VolumeName
	pv, err := m.claims.GetPersistentVolume(ctx, name)
	if err != nil || pv == nil {
		return nil, fmt.Errorf("failed to fetch PV %s from API server: %w", name, err)
	}
	switch {
	case pv.Spec.ClaimRef == nil:
		return nil, fmt.Errorf("found PV object %s but it has a nil pv.Spec.ClaimRef indicating it is not yet bound to the claim", name)
	case pv.Spec.ClaimRef.UID != pvc.UID:
		return nil, fmt.Errorf("found PV object %s but its pv.Spec.ClaimRef.UID %s does not point to claim.UID %s", name, pv.Spec.ClaimRef.UID, pvc.UID)
	}
	return pv, nil
}

// setUpClaim mounts the PV a claim volume is bound to: a hostPath PV is used
// in place (its type checked, no fsGroup, as upstream), a local PV is
// bind-mounted under <pod>/volumes/kubernetes.io~local-volume/<pv> (read-only
// when the pod's claim reference says so) and given the pod's fsGroup as its
// fsGroupChangePolicy asks. The claim is remembered for ClaimVolumes.
func (m *Manager) setUpClaim(ctx context.Context, pod *v1.Pod, vol *v1.Volume, bc *boundClaim) (VolumeInfo, error) {
	if bc.err != nil {
		return VolumeInfo{}, bc.err
	}
	pv := bc.pv
	if err := checkVolumeMode(pod, vol.Name, pv); err != nil {
		return VolumeInfo{}, err
	}
	cv := ClaimVolume{Name: vol.Name, Claim: k8stypes.NamespacedName{Namespace: bc.pvc.Namespace, Name: bc.pvc.Name}, PV: pv.Name}
	var info VolumeInfo
	var err error
	var expansion csi.Expansion
	expand := false
	switch src := &pv.Spec.PersistentVolumeSource; {
	case src.HostPath != nil:
		info, err = m.setUpHostPath(src.HostPath)
		info.ReadOnly = bc.readOnly
	case src.Local != nil && isBlock(pv):
		info, err = localBlockDevice(pv, bc.readOnly)
	case src.Local != nil:
		info, err = m.setUpLocal(pod, pv, bc.readOnly)
		cv.Path = info.HostPath
	case src.NFS != nil:
		info, err = m.setUpNFS(ctx, pod, pv.Name, src.NFS, bc.readOnly, pv.Spec.MountOptions)
		cv.Path = info.HostPath
	case src.CSI != nil && m.csi != nil:
		info, expansion, err = m.setUpCSIPV(ctx, pod, bc)
		expand = err == nil && bc.pvc != nil
		cv.Path, cv.CSIDriver, cv.CSIHandle = info.HostPath, src.CSI.Driver, src.CSI.VolumeHandle
	default:
		return VolumeInfo{}, fmt.Errorf("persistent volume %s: %s volumes are not supported by this kubelet", pv.Name, sourceType(src))
	}
	if err != nil {
		return VolumeInfo{}, fmt.Errorf("persistent volume %s: %w", pv.Name, err)
	}
	m.rememberClaim(pod.UID, cv)
	if expand {
		// Remembered first: the node's record of the volume's size stays
		// while a pod of this node has it (forgetClaims).
		m.expandClaim(ctx, pod, bc.latestPVC(), bc.latestPV(), expansion)
	}
	return info, nil
}

// checkVolumeMode applies upstream's rule: a Filesystem volume may only be
// in volumeMounts, a Block volume only in volumeDevices (local and CSI
// volumes here).
func checkVolumeMode(pod *v1.Pod, name string, pv *v1.PersistentVolume) error {
	mode := v1.PersistentVolumeFilesystem
	if pv.Spec.VolumeMode != nil {
		mode = *pv.Spec.VolumeMode
	}
	mounted, asDevice := false, false
	for _, c := range allContainers(pod) {
		mounted = mounted || slices.ContainsFunc(c.VolumeMounts, func(vm v1.VolumeMount) bool { return vm.Name == name })
		asDevice = asDevice || slices.ContainsFunc(c.VolumeDevices, func(vd v1.VolumeDevice) bool { return vd.Name == name })
	}
	switch {
	case mounted && mode != v1.PersistentVolumeFilesystem:
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeMounts", name, mode)
	case asDevice && mode != v1.PersistentVolumeBlock:
		return fmt.Errorf("volume %s has volumeMode %s, but is specified in volumeDevices", name, mode)
	case mode == v1.PersistentVolumeBlock && pv.Spec.Local == nil && pv.Spec.CSI == nil:
		return fmt.Errorf("volume %s: volumeMode Block is supported for local and CSI persistent volumes only by this kubelet", name)
	}
	return nil
}

// allContainers lists the pod's init, regular and ephemeral containers' common parts.
func allContainers(pod *v1.Pod) []*v1.Container {
	out := make([]*v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers)+len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		out = append(out, (*v1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon))
	}
	return out
}

// setUpLocal bind-mounts a local PV's path for the pod (once; later syncs
// find it mounted) and gives it the pod's fsGroup on the first mount unless
// read-only.
func (m *Manager) setUpLocal(pod *v1.Pod, pv *v1.PersistentVolume, readOnly bool) (VolumeInfo, error) {
	path := pv.Spec.Local.Path
	switch {
	case path == "":
		return VolumeInfo{}, fmt.Errorf("LocalVolume volume %q path is empty", pv.Name)
	case slices.Contains(strings.Split(filepath.ToSlash(path), "/"), ".."):
		return VolumeInfo{}, fmt.Errorf("invalid path: %s must not contain '..'", path)
	case !filepath.IsAbs(path):
		return VolumeInfo{}, fmt.Errorf("invalid path: %s must be an absolute path", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return VolumeInfo{}, fmt.Errorf("local volume path: %w", err)
	}
	if fi.Mode()&os.ModeDevice != 0 {
		return VolumeInfo{}, fmt.Errorf("local volume path %s is a device: formatting and mounting a device for volumeMode Filesystem is not supported by this kubelet", path)
	}
	dir := m.volumePath(pod.UID, LocalVolumePluginDir, pv.Name)
	info := VolumeInfo{HostPath: dir, ReadOnly: readOnly, Managed: true}
	if fsType, err := mountFSType(dir); err == nil && fsType != "" {
		return info, nil // mounted by an earlier sync
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return VolumeInfo{}, fmt.Errorf("create %s: %w", dir, err)
	}
	ignored, err := bindMount(path, dir, readOnly, pv.Spec.MountOptions)
	if err != nil {
		_ = os.Remove(dir)
		return VolumeInfo{}, err
	}
	m.logger.Info("Mounted local volume", zap.String("pv", pv.Name), zap.String("path", path), zap.String("podUID", string(pod.UID)))
	if len(ignored) > 0 {
		m.logger.Warn("Mount options a bind mount cannot take are not applied to the local volume",
			zap.String("pv", pv.Name), zap.Strings("ignored", ignored))
	}
	if !readOnly {
		if err := setVolumeOwnershipPolicy(dir, fsGroupOf(pod), fsGroupChangePolicyOf(pod)); err != nil {
			return VolumeInfo{}, err
		}
	}
	return info, nil
}

func isBlock(pv *v1.PersistentVolume) bool {
	return pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock
}

// localBlockDevice checks a volumeMode Block local PV: its path must be a
// block device, which containers get as a device node (Docker's --device).
func localBlockDevice(pv *v1.PersistentVolume, readOnly bool) (VolumeInfo, error) {
	path := pv.Spec.Local.Path
	if !filepath.IsAbs(path) || slices.Contains(strings.Split(filepath.ToSlash(path), "/"), "..") {
		return VolumeInfo{}, fmt.Errorf("invalid path: %s must be an absolute path without '..'", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return VolumeInfo{}, fmt.Errorf("local volume path: %w", err)
	}
	if fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
		return VolumeInfo{}, fmt.Errorf("local volume path %s is not a block device (volumeMode Block)", path)
	}
	return VolumeInfo{Device: path, ReadOnly: readOnly}, nil
}

func fsGroupChangePolicyOf(pod *v1.Pod) *v1.PodFSGroupChangePolicy {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroupChangePolicy
}

// rememberClaim records a mounted claim volume of a pod.
func (m *Manager) rememberClaim(uid k8stypes.UID, cv ClaimVolume) {
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	if m.claimVols == nil {
		m.claimVols = map[k8stypes.UID]map[string]ClaimVolume{}
	}
	if m.claimVols[uid] == nil {
		m.claimVols[uid] = map[string]ClaimVolume{}
	}
	m.claimVols[uid][cv.Name] = cv
}

// ClaimVolumes lists the mounted claim-backed volumes of every pod, by pod
// UID, each pod's sorted by volume name.
func (m *Manager) ClaimVolumes() map[k8stypes.UID][]ClaimVolume {
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	out := make(map[k8stypes.UID][]ClaimVolume, len(m.claimVols))
	for uid, vols := range m.claimVols {
		list := make([]ClaimVolume, 0, len(vols))
		for _, cv := range vols {
			list = append(list, cv)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
		out[uid] = list
	}
	return out
}

// forgetClaims drops what rememberClaim recorded of a pod.
func (m *Manager) forgetClaims(uid k8stypes.UID) {
	m.claimMu.Lock()
	defer m.claimMu.Unlock()
	delete(m.claimVols, uid)
	delete(m.resolved, uid)
	// The expansion records of PVs no pod of this node mounts any more.
	for pv := range m.expandSkip {
		if !m.mountedLocked(pv) {
			delete(m.expandSkip, pv)
		}
	}
	for pv := range m.nodeSize {
		if !m.mountedLocked(pv) {
			delete(m.nodeSize, pv)
		}
	}
}

// mountedLocked says whether a pod of this node has pv mounted (claimMu held).
func (m *Manager) mountedLocked(pv string) bool {
	for _, vols := range m.claimVols {
		for _, cv := range vols {
			if cv.PV == pv {
				return true
			}
		}
	}
	return false
}
