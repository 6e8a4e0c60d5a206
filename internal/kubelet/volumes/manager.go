// Package volumes sets up and tears down pod volumes: emptyDir (a directory, or a
// tmpfs mount for medium Memory), hostPath (with the type checks), downwardAPI, and,
// when the kubelet talks to an API server (Options.Objects), configMap, secret and
// projected volumes (configMap, secret, downwardAPI and bound service account token
// sources, which makes the kube-api-access-xxxxx volume work), and, with
// Options.Claims, persistentVolumeClaim and generic ephemeral volumes bound to
// hostPath and local PVs (claims.go). Files are written
// atomically with the "..data" symlink swap and rewritten when their content
// changes; downwardAPI, secret and projected volumes live on tmpfs like upstream,
// configMap volumes on disk. Volume directories follow the upstream layout,
// <PodsDir>/<pod-uid>/volumes/kubernetes.io~<plugin>/<volume-name>, so node tools
// that know the kubelet's tree keep working. Other volume types (and the
// API-backed ones without Objects) are refused with an error naming the volume.
// A volumeMount's subPath is resolved inside its volume with openat2 and pinned
// with a bind mount under <pod>/volume-subpaths (BindSubPath), torn down with the
// pod's volumes.
//
// Only the kubelet coordinator (internal/kubelet), its runtime helper and
// internal/app may import it. Of this project it imports only the leaves
// internal/procfs (its mountinfo unescaping), internal/keylock (one pod's
// operations serialised, never another pod's), internal/logging (the crash
// handler) and internal/kubelet/resources (the downward API's
// resourceFieldRef), and its CSI part.
package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	"github.com/kubelet-dockershim/kubelet/internal/keylock"
	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// Plugin directory names under <pod>/volumes (upstream's escaped plugin names).
const (
	EmptyDirPluginDir    = "kubernetes.io~empty-dir"
	DownwardAPIPluginDir = "kubernetes.io~downward-api"
	volumesDirName       = "volumes"
)

// ErrStillMounted is returned (wrapped) when a pod directory cannot be removed because
// something is still mounted under it; nothing under it is deleted then.
var ErrStillMounted = errors.New("still mounted")

// Options configures a Manager.
type Options struct {
	// PodsDir is <root-dir>/pods (e.g. /var/lib/kubelet/pods). Required, absolute.
	PodsDir string
	// Allocatable gives the node's current allocatable, used for limits a
	// container leaves unset (downwardAPI resourceFieldRef, the default size of
	// memory-backed volumes); resources.Node. nil: none (those limits are 0 and
	// memory-backed volumes get the kernel's default size).
	Allocatable NodeAllocatable
	// Objects reads configMaps and secrets and creates service account tokens for
	// configMap, secret and projected volumes. nil (standalone): those volumes are
	// refused.
	Objects APIObjects
	// TrustBundles gives the trust anchors of clusterTrustBundle projections;
	// nil (standalone): those projections are refused.
	TrustBundles TrustBundles
	// PodCertificates gives the credentials of podCertificate projections;
	// nil (standalone, or the PodCertificateRequest gate off): those
	// projections are refused.
	PodCertificates PodCertificates
	// Claims reads persistent volume claims and volumes for
	// persistentVolumeClaim and generic ephemeral volumes. nil (standalone):
	// those volumes are refused.
	Claims ClaimObjects
	// CSI mounts CSI volumes through the registered drivers (csi.Registry);
	// nil: CSI volumes are refused.
	CSI CSIVolumes
	// ClaimStatus writes the status of resized claims (node expansion of
	// CSI volumes); nil (standalone): no expansion.
	ClaimStatus ClaimStatus
	// Recorder records the resize events on pods and claims; nil: none.
	Recorder record.EventRecorder
	// Clock times service account token refreshes; nil = the real clock.
	Clock clock.PassiveClock
	// Registerer receives upstream's volume_manager_total_volumes and
	// storage_operation_duration_seconds; nil: not registered.
	Registerer prometheus.Registerer
	// Logger; nil = no logging.
	Logger *zap.Logger
}

// VolumeInfo describes a set-up volume for the container mounts.
type VolumeInfo struct {
	// HostPath is the path to bind-mount into containers.
	HostPath string
	// ReadOnly volumes (downwardAPI, configMap, secret, projected) must be mounted
	// read-only whatever the container's volumeMount says.
	ReadOnly bool
	// Managed volumes live under the pod directory and are created by the kubelet
	// (emptyDir, downwardAPI, configMap, secret, projected); hostPath volumes are not.
	Managed bool
	// Device is the host block device of a volumeMode Block volume, given to
	// the containers that list it in volumeDevices (HostPath is empty then).
	Device string
}

// Manager sets up and tears down pod volumes. Its methods are safe for concurrent use;
// the operations on one pod are serialised, those on different pods run side by side.
type Manager struct {
	podsDir  string
	node     NodeAllocatable // nil: none
	objects  APIObjects      // nil: no API-backed volumes
	bundles  TrustBundles    // nil: no clusterTrustBundle projections
	podCerts PodCertificates // nil: no podCertificate projections
	claims   ClaimObjects    // nil: no claim volumes
	csi      CSIVolumes      // nil: no CSI volumes
	// claimStatus and recorder serve node expansion; nil: none.
	claimStatus ClaimStatus
	recorder    record.EventRecorder
	tokens      *tokenCache
	metrics     *volumeMetrics
	logger      *zap.Logger

	// pods serialises the mounts, unmounts and removals of one pod; one pod's
	// stuck volume (a hung CSI driver) never blocks another pod.
	pods keylock.Locks

	claimMu   sync.Mutex
	claimVols map[k8stypes.UID]map[string]ClaimVolume // mounted claim volumes by pod and volume name
	resolved  map[k8stypes.UID]map[string]*boundClaim // claims resolved to their PV, by pod and volume name
	// expandSkip is the size of each PV whose node expansion was given up
	// on (read-only, or in use), until another size is asked.
	expandSkip map[string]string
	// nodeSize is the size each CSI PV has on this node: its capacity when
	// first mounted here, then the size of the last node expansion here
	// (upstream's actual state of world persistentVolumeSize). A ReadWriteMany
	// volume another node already expanded is expanded here too from it.
	nodeSize map[string]resource.Quantity
	// expansions serialises the node expansions of one PV.
	expansions keylock.Locks
}

// NodeAllocatable gives the node's current allocatable (resources.Node).
type NodeAllocatable interface {
	Allocatable() v1.ResourceList
}

// New returns a Manager. It checks opts and does no I/O.
func New(opts Options) (*Manager, error) {
	if opts.PodsDir == "" {
		return nil, errors.New("volumes: PodsDir is required")
	}
	if !filepath.IsAbs(opts.PodsDir) {
		return nil, fmt.Errorf("volumes: PodsDir %q must be an absolute path", opts.PodsDir)
	}
	logger := opts.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	logger = logger.Named("volumes")
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	met, err := newVolumeMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Manager{
		podsDir:     filepath.Clean(opts.PodsDir),
		node:        opts.Allocatable,
		objects:     opts.Objects,
		bundles:     opts.TrustBundles,
		podCerts:    opts.PodCertificates,
		claims:      opts.Claims,
		csi:         opts.CSI,
		claimStatus: opts.ClaimStatus,
		recorder:    opts.Recorder,
		tokens:      newTokenCache(opts.Objects, clk, logger),
		metrics:     met,
		logger:      logger,
	}, nil
}

// checkUID rejects UIDs that cannot be a single directory name under PodsDir.
func checkUID(uid k8stypes.UID) error {
	if uid == "" || strings.ContainsAny(string(uid), `/\`) || strings.HasPrefix(string(uid), ".") {
		return fmt.Errorf("volumes: unusable pod UID %q", uid)
	}
	return nil
}

func (m *Manager) podDir(uid k8stypes.UID) string {
	return filepath.Join(m.podsDir, string(uid))
}

func (m *Manager) volumesDir(uid k8stypes.UID) string {
	return filepath.Join(m.podDir(uid), volumesDirName)
}

func (m *Manager) volumePath(uid k8stypes.UID, pluginDir, name string) string {
	return filepath.Join(m.volumesDir(uid), pluginDir, name)
}

// MountVolumes sets up every volume of pod and returns where each one is, by volume
// name. It is idempotent and meant to run on every pod sync: an existing emptyDir is
// kept; downwardAPI, configMap, secret and projected volumes are re-read (objects
// and tokens) and rewritten when their content changed. All volumes are tried; the
// result holds those that succeeded and the error joins one error per failed volume,
// each naming it (`volume "x": configmap "y" not found`).
func (m *Manager) MountVolumes(ctx context.Context, pod *v1.Pod) (map[string]VolumeInfo, error) {
	if pod == nil {
		return nil, errors.New("volumes: nil pod")
	}
	if err := checkUID(pod.UID); err != nil {
		return nil, err
	}
	objVols := m.collectObjectVolumes(ctx, pod) // API calls, outside the lock
	claims := m.collectClaims(ctx, pod)
	unlock, err := m.lockPod(ctx, pod.UID)
	if err != nil {
		return nil, err
	}
	defer unlock()

	infos := make(map[string]VolumeInfo, len(pod.Spec.Volumes))
	var errs []error
	m.metrics.want(pod, func(vol *v1.Volume) string { return volumePluginName(vol, claims[vol.Name]) })
	for i := range pod.Spec.Volumes {
		if err := ctx.Err(); err != nil {
			return infos, errors.Join(append(errs, fmt.Errorf("mount volumes of pod %s/%s: %w", pod.Namespace, pod.Name, err))...)
		}
		vol := &pod.Spec.Volumes[i]
		start := time.Now()
		info, err := m.mountVolume(ctx, pod, vol, objVols[vol.Name], claims[vol.Name])
		m.metrics.mounted(pod.UID, vol.Name, volumePluginName(vol, claims[vol.Name]), start, err)
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %q: %w", vol.Name, err))
			continue
		}
		infos[vol.Name] = info
	}
	return infos, errors.Join(errs...)
}

// mountVolume dispatches one volume to its plugin; ov is the collected content of
// an API-backed volume (nil for the others, or without Objects), bc the claim
// and PV of a claim volume (nil for the others, or without Claims).
func (m *Manager) mountVolume(ctx context.Context, pod *v1.Pod, vol *v1.Volume, ov *objectVolume, bc *boundClaim) (VolumeInfo, error) {
	if msgs := validation.IsDNS1123Label(vol.Name); len(msgs) != 0 {
		return VolumeInfo{}, fmt.Errorf("invalid volume name: %s", strings.Join(msgs, "; "))
	}
	src := &vol.VolumeSource
	switch {
	case src.HostPath != nil:
		return m.setUpHostPath(src.HostPath)
	case src.DownwardAPI != nil:
		return m.setUpDownwardAPI(pod, vol.Name, src.DownwardAPI)
	case src.EmptyDir != nil:
		return m.setUpEmptyDir(pod, vol.Name, src.EmptyDir)
	case ov != nil:
		return m.setUpObjectVolume(pod, vol.Name, ov)
	case bc != nil:
		return m.setUpClaim(ctx, pod, vol, bc)
	case src.CSI != nil && m.csi != nil:
		return m.setUpInlineCSI(ctx, pod, vol.Name, src.CSI)
	case src.NFS != nil:
		return m.setUpNFS(ctx, pod, vol.Name, src.NFS, src.NFS.ReadOnly, nil)
	}
	typ := sourceType(src)
	if typ == "" {
		// A volume without a source is an emptyDir (upstream's rule).
		return m.setUpEmptyDir(pod, vol.Name, &v1.EmptyDirVolumeSource{})
	}
	return VolumeInfo{}, &UnsupportedVolumeError{Volume: vol.Name, Type: typ}
}

// UnmountVolumes tears down every volume of the pod: first the subPath bind mounts
// under <pod>/volume-subpaths (BindSubPath; upstream's CleanSubPaths), then tmpfs
// (and any other) mounts under <pod>/volumes, deepest first; each tree is removed
// once nothing is mounted in it. The rest of the pod directory (etc-hosts,
// containers/) is left to CleanupOrphans. The pod's cached service account tokens
// are dropped. A pod without volumes is not an error.
func (m *Manager) UnmountVolumes(ctx context.Context, podUID k8stypes.UID) error {
	if err := checkUID(podUID); err != nil {
		return err
	}
	m.tokens.forgetPod(podUID)
	m.forgetClaims(podUID)
	unlock, err := m.lockPod(ctx, podUID)
	if err != nil {
		return err
	}
	defer unlock()
	start := time.Now()
	err = m.removeTree(ctx, m.subPathsDir(podUID))
	if err != nil {
		err = fmt.Errorf("clean up subPath mounts: %w", err)
	} else if err = m.tearDownCSI(ctx, podUID); err == nil {
		err = m.tearDownCSIBlock(ctx, podUID)
	}
	if err == nil {
		err = m.removeTree(ctx, m.volumesDir(podUID))
	}
	m.metrics.unmounted(podUID, start, err)
	return err
}

// lockPod waits for the pod's earlier volume operation (never another pod's).
func (m *Manager) lockPod(ctx context.Context, uid k8stypes.UID) (func(), error) {
	unlock, err := m.pods.Lock(ctx, string(uid))
	if err != nil {
		return nil, fmt.Errorf("volumes of pod %s: an earlier operation on them is still running: %w", uid, err)
	}
	return unlock, nil
}

// orphanWait is how long CleanupOrphans waits for the removals it started;
// the ones still running (a hung CSI driver) go on in the background, holding
// their pod, and later calls skip that pod until they end.
const orphanWait = 2 * time.Second

// CleanupOrphans removes the directory of every pod under PodsDir that is not in
// active, unmounting its volumes first. active must hold every pod that may still have
// running containers or be set up again. Each pod is removed on its own goroutine;
// a pod whose volume operation is still running is skipped (the next call retries
// it), and the call returns once the removals ended or after orphanWait, so that a
// hung driver never holds the caller (housekeeping). The errors of the removals that
// ended are joined; one bad pod does not stop the others.
func (m *Manager) CleanupOrphans(ctx context.Context, active map[k8stypes.UID]bool) error {
	entries, err := os.ReadDir(m.podsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list pod directories in %s: %w", m.podsDir, err)
	}
	results := make(chan error, len(entries))
	started := 0
	for _, e := range entries {
		uid := k8stypes.UID(e.Name())
		if !e.IsDir() || active[uid] {
			continue
		}
		unlock, ok := m.pods.TryLock(string(uid))
		if !ok {
			continue
		}
		started++
		go func() {
			defer unlock()
			defer logging.HandleCrash(m.logger, "orphaned pod cleanup")
			results <- m.removeOrphan(ctx, uid)
		}()
	}
	timer := time.NewTimer(orphanWait)
	defer timer.Stop()
	var errs []error
	for i := 0; i < started; i++ {
		select {
		case err := <-results:
			errs = append(errs, err)
		case <-timer.C:
			m.logger.Info("Orphaned pod directories are still being removed in the background", zap.Int("pods", started-i))
			return errors.Join(errs...)
		}
	}
	return errors.Join(errs...)
}

// removeOrphan unmounts and removes an orphaned pod's directory; the caller
// holds the pod.
func (m *Manager) removeOrphan(ctx context.Context, uid k8stypes.UID) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("clean up orphaned pod %s: %w", uid, err)
	}
	m.tokens.forgetPod(uid)
	m.forgetClaims(uid)
	// The subPath bind mounts go first (they may pin files of the volumes);
	// removeTree would find them too, deepest first.
	err := m.removeTree(ctx, m.subPathsDir(uid))
	if err == nil {
		err = m.tearDownCSI(ctx, uid)
	}
	if err == nil {
		err = m.tearDownCSIBlock(ctx, uid)
	}
	if err == nil {
		err = m.removeTree(ctx, m.podDir(uid))
	}
	if err != nil {
		return fmt.Errorf("orphaned pod %s: %w", uid, err)
	}
	m.metrics.unmounted(uid, time.Now(), nil)
	m.logger.Info("Removed orphaned pod directory", zap.String("podUID", string(uid)))
	return nil
}

// removeTree unmounts everything mounted under dir (deepest first), checks that
// nothing is left mounted, and removes dir. It never deletes through a mount point.
func (m *Manager) removeTree(ctx context.Context, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, mt := range mounts {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := unmountFS(mt.MountPoint, mt.FSType); err != nil {
			errs = append(errs, err)
			continue
		}
		m.logger.Debug("Unmounted", zap.String("path", mt.MountPoint))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	left, err := mountPointsUnder(dir)
	if err != nil {
		return err
	}
	if len(left) > 0 {
		return fmt.Errorf("remove %s: %s %w", dir, strings.Join(left, ", "), ErrStillMounted)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}
