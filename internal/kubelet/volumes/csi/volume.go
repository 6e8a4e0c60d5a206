package csi

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelet-dockershim/kubelet/internal/logging"
)

// File and directory names of upstream's CSI plugin.
const (
	// PodPluginDir holds a pod's CSI volumes under <pod>/volumes.
	PodPluginDir    = "kubernetes.io~csi"
	volDataFileName = "vol_data.json"
	globalMount     = "globalmount"
	mountDirName    = "mount"
	ephemeralKey    = "csi.storage.k8s.io/ephemeral"
)

// Volume is what the volume manager knows of a CSI volume: from a PV's
// spec.csi (Persistent), or from a pod's inline csi volume (Ephemeral).
type Volume struct {
	// SpecName is the PV's name, or the pod volume's name inline.
	SpecName     string
	Driver       string
	VolumeHandle string
	FSType       string
	ReadOnly     bool
	Attributes   map[string]string
	AccessModes  []v1.PersistentVolumeAccessMode
	MountOptions []string
	// StageSecrets and PublishSecrets are the referenced secrets' data.
	StageSecrets, PublishSecrets map[string]string
	Ephemeral                    bool
}

// volData is upstream's vol_data.json.
type volData struct {
	SpecVolID           string `json:"specVolID"`
	VolumeHandle        string `json:"volumeHandle"`
	DriverName          string `json:"driverName"`
	NodeName            string `json:"nodeName,omitempty"`
	AttachmentID        string `json:"attachmentID,omitempty"`
	VolumeLifecycleMode string `json:"volumeLifecycleMode,omitempty"`
}

// EphemeralHandle is upstream's handle of an inline volume:
// csi-<sha256(pod UID + volume name)>.
func EphemeralHandle(podUID, volName string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(podUID+volName)))
}

func attachmentName(handle, driver, node string) string {
	return fmt.Sprintf("csi-%x", sha256.Sum256([]byte(handle+driver+node)))
}

// stagingDir is <root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>.
func (r *Registry) stagingDir(driver, handle string) string {
	return filepath.Join(r.rootDir, "plugins", PluginName, driver, fmt.Sprintf("%x", sha256.Sum256([]byte(handle))))
}

// SetUp makes a CSI volume available at dir/mount for the pod (dir is
// <pod>/volumes/kubernetes.io~csi/<spec name>): the driver must be
// registered and allowed for the volume's mode by its CSIDriver; an
// attach-required driver's VolumeAttachment must be attached; the volume is
// staged once per node (NodeStageVolume on the global mount) when the
// driver stages, then published for the pod (NodePublishVolume), with
// upstream's paths, vol_data.json files and pod info. The fsGroup is given
// to the driver (VOLUME_MOUNT_GROUP) or applied by chown as the CSIDriver's
// fsGroupPolicy says, through own. A volume already published is left alone.
func (r *Registry) SetUp(ctx context.Context, pod *v1.Pod, vol Volume, dir string, fsGroup *int64, own func(dir string, fsGroup *int64) error) (string, error) {
	target := filepath.Join(dir, mountDirName)
	if r.isDone(target) {
		return target, nil
	}
	ctx, unlock, err := r.volumeOp(ctx, vol.Driver, vol.VolumeHandle)
	if err != nil {
		return "", err
	}
	defer unlock()
	if r.isDone(target) { // another pod's operation on the volume did it
		return target, nil
	}
	nc, err := r.connect(ctx, vol.Driver, "mounter.SetUpAt failed to get CSI client")
	if err != nil {
		return "", err
	}
	defer nc.close()
	drv, publishCtx, err := r.admit(ctx, vol)
	if err != nil {
		return "", err
	}
	node, caps := nc.node, nc.caps
	capability := volumeCapability(vol)
	staging := ""
	if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] && !vol.Ephemeral {
		sd := r.stagingDir(vol.Driver, vol.VolumeHandle)
		staging = filepath.Join(sd, globalMount)
		if !r.isDone(staging) {
			if err := os.MkdirAll(staging, 0o750); err != nil {
				return "", err
			}
			if err := writeVolData(sd, volData{VolumeHandle: vol.VolumeHandle, DriverName: vol.Driver}); err != nil {
				return "", err
			}
			if _, err := node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: vol.VolumeHandle, PublishContext: publishCtx,
				StagingTargetPath: staging, VolumeCapability: capability, Secrets: vol.StageSecrets, VolumeContext: vol.Attributes}); err != nil {
				return "", fmt.Errorf("kubernetes.io/csi: attacher.MountDevice failed: %w", err)
			}
			r.markDone(staging, true)
		}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return "", err
	}
	mode := storagev1.VolumeLifecyclePersistent
	if vol.Ephemeral {
		mode = storagev1.VolumeLifecycleEphemeral
	}
	if err := writeVolData(dir, volData{SpecVolID: vol.SpecName, VolumeHandle: vol.VolumeHandle, DriverName: vol.Driver, NodeName: r.nodeName,
		AttachmentID: attachmentName(vol.VolumeHandle, vol.Driver, r.nodeName), VolumeLifecycleMode: string(mode)}); err != nil {
		return "", err
	}
	volCtx := podInfoContext(drv, pod, vol)
	driverGroup := fsGroup != nil && caps[csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP]
	if driverGroup {
		if m := capability.GetMount(); m != nil {
			m.VolumeMountGroup = fmt.Sprint(*fsGroup)
		}
	}
	if _, err := node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: vol.VolumeHandle, PublishContext: publishCtx,
		StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, Readonly: vol.ReadOnly,
		Secrets: vol.PublishSecrets, VolumeContext: volCtx}); err != nil {
		return "", fmt.Errorf("kubernetes.io/csi: mounter.SetUpAt failed: %w", err)
	}
	r.markDone(target, true)
	if fsGroup != nil && !driverGroup && !vol.ReadOnly && fsGroupApplies(drv, vol) {
		if err := own(target, fsGroup); err != nil {
			return "", err
		}
	}
	return target, nil
}

// TearDown unpublishes the pod's CSI volume at dir (NodeUnpublishVolume),
// removes its directory, and unstages the volume once no pod publishes it
// any more. A directory without vol_data.json is left to the caller.
func (r *Registry) TearDown(ctx context.Context, dir string, stillPublished func(driver, handle string) bool) error {
	data, err := readVolData(dir)
	if err != nil {
		return err
	}
	ctx, unlock, err := r.volumeOp(ctx, data.DriverName, data.VolumeHandle)
	if err != nil {
		return err
	}
	defer unlock()
	nc, err := r.connect(ctx, data.DriverName, "unmounter failed")
	if err != nil {
		return err
	}
	defer nc.close()
	target := filepath.Join(dir, mountDirName)
	if err := r.unpublish(ctx, nc, data.VolumeHandle, target, "Unmounter.TearDownAt failed"); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if data.VolumeLifecycleMode == string(storagev1.VolumeLifecycleEphemeral) || stillPublished(data.DriverName, data.VolumeHandle) {
		return nil
	}
	sd := r.stagingDir(data.DriverName, data.VolumeHandle)
	staging := filepath.Join(sd, globalMount)
	if _, err := os.Stat(staging); err != nil {
		return nil // never staged
	}
	if err := r.unstage(ctx, nc, data.VolumeHandle, staging, "attacher.UnmountDevice failed"); err != nil {
		return err
	}
	return os.RemoveAll(sd)
}

// unpublish is NodeUnpublishVolume of target; nothing may stay mounted
// there. op prefixes the driver's error (upstream's message).
func (r *Registry) unpublish(ctx context.Context, nc *nodeConn, handle, target, op string) error {
	if _, err := nc.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: handle, TargetPath: target}); err != nil {
		return fmt.Errorf("kubernetes.io/csi: %s: %w", op, err)
	}
	r.markDone(target, false)
	if published(target) {
		return fmt.Errorf("kubernetes.io/csi: %s is still mounted after NodeUnpublishVolume", target)
	}
	return nil
}

// unstage is NodeUnstageVolume of staging (when the driver stages);
// nothing may stay mounted there.
func (r *Registry) unstage(ctx context.Context, nc *nodeConn, handle, staging, op string) error {
	if nc.caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		if _, err := nc.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: handle, StagingTargetPath: staging}); err != nil {
			return fmt.Errorf("kubernetes.io/csi: %s: %w", op, err)
		}
	}
	r.markDone(staging, false)
	if published(staging) {
		return fmt.Errorf("kubernetes.io/csi: %s is still mounted after NodeUnstageVolume", staging)
	}
	return nil
}

// nodeConn is one operation's connection to a driver's node service, with
// the capabilities it reported.
type nodeConn struct {
	node  csipb.NodeClient
	caps  map[csipb.NodeServiceCapability_RPC_Type]bool
	close func()
}

// connect dials the registered driver's node service and asks its
// capabilities; op prefixes the error of a driver not registered
// (upstream's message of that operation).
func (r *Registry) connect(ctx context.Context, driver, op string) (*nodeConn, error) {
	endpoint, ok := r.Endpoint(driver)
	if !ok {
		if op != "" {
			op += ": "
		}
		return nil, fmt.Errorf("kubernetes.io/csi: %sdriver name %s not found in the list of registered CSI drivers", op, driver)
	}
	conn, err := dial(endpoint)
	if err != nil {
		return nil, err
	}
	node := csipb.NewNodeClient(conn)
	caps, err := nodeCapabilities(ctx, node)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("kubernetes.io/csi: NodeGetCapabilities: %w", err)
	}
	return &nodeConn{node: node, caps: caps, close: func() { _ = conn.Close() }}, nil
}

// admit applies the driver's CSIDriver object to the volume (its lifecycle
// modes) and returns it with the publish context (the VolumeAttachment's,
// for a driver that attaches).
func (r *Registry) admit(ctx context.Context, vol Volume) (*storagev1.CSIDriver, map[string]string, error) {
	drv, err := r.csiDriver(ctx, vol.Driver)
	if err != nil {
		return nil, nil, err
	}
	if err := checkLifecycle(drv, vol); err != nil {
		return nil, nil, err
	}
	publishCtx, err := r.publishContext(ctx, drv, vol)
	if err != nil {
		return nil, nil, err
	}
	return drv, publishCtx, nil
}

// volumeOp starts an operation on one volume: it waits for the volume's
// previous operation (never for another volume's) and bounds the whole by
// the driver timeout. The returned func ends it.
func (r *Registry) volumeOp(ctx context.Context, driver, handle string) (context.Context, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, r.opTimeout)
	unlock, err := r.volumes.Lock(ctx, driver+"\x00"+handle)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("kubernetes.io/csi: volume %s of driver %s: an earlier operation on it is still running: %w", handle, driver, err)
	}
	return ctx, func() { unlock(); cancel() }, nil
}

// VolumeOf reads the driver and handle a pod volume directory holds.
func VolumeOf(dir string) (driver, handle string, err error) {
	d, err := readVolData(dir)
	return d.DriverName, d.VolumeHandle, err
}

// isDone reports whether a staging or target path was staged or published
// by this process (drivers need not mount anything there), or is a mount
// point (after a restart).
func (r *Registry) isDone(path string) bool {
	r.mu.Lock()
	done := r.done[path]
	r.mu.Unlock()
	return done || published(path)
}

func (r *Registry) markDone(path string, done bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if done {
		r.done[path] = true
	} else {
		delete(r.done, path)
	}
}

// published reports whether something is mounted at path (its device
// differs from its parent's, or mountinfo lists it).
func published(path string) bool {
	ok, err := isMountPoint(path)
	return err == nil && ok
}

func writeVolData(dir string, d volData) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, volDataFileName), b, 0o640)
}

func readVolData(dir string) (volData, error) {
	path := filepath.Join(dir, volDataFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		return volData{}, err
	}
	d, err := parseVolData(b)
	if err != nil {
		return volData{}, fmt.Errorf("decode %s: %w", path, err)
	}
	return d, nil
}

// parseVolData decodes a vol_data.json. Its driver name becomes a directory
// under the staging root (TearDown unstages and removes it), so it must be
// one that registration accepts; an error comes with no data.
func parseVolData(b []byte) (volData, error) {
	var d volData
	if err := json.Unmarshal(b, &d); err != nil {
		return volData{}, err
	}
	if err := checkDriverName(d.DriverName); err != nil {
		return volData{}, err
	}
	return d, nil
}

// csiDriver reads the driver's CSIDriver object; nil when it has none (or
// without an API server): upstream's defaults apply then.
func (r *Registry) csiDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	if r.client == nil {
		return nil, nil
	}
	d, err := r.client.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes.io/csi: get CSIDriver %s: %w", name, err)
	}
	return d, nil
}

// checkLifecycle applies the CSIDriver's volumeLifecycleModes (default:
// Persistent only).
func checkLifecycle(drv *storagev1.CSIDriver, vol Volume) error {
	modes := []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent}
	if drv != nil && len(drv.Spec.VolumeLifecycleModes) > 0 {
		modes = drv.Spec.VolumeLifecycleModes
	}
	want := storagev1.VolumeLifecyclePersistent
	if vol.Ephemeral {
		want = storagev1.VolumeLifecycleEphemeral
	}
	if !slices.Contains(modes, want) {
		return fmt.Errorf("kubernetes.io/csi: volume mode %q not supported by driver %s (only supports %q)", want, vol.Driver, modes)
	}
	return nil
}

// publishContext is the VolumeAttachment's attachment metadata when the
// driver needs attaching (its CSIDriver says so, or it has none); the
// attachment must be attached.
func (r *Registry) publishContext(ctx context.Context, drv *storagev1.CSIDriver, vol Volume) (map[string]string, error) {
	if vol.Ephemeral || drv != nil && drv.Spec.AttachRequired != nil && !*drv.Spec.AttachRequired {
		return nil, nil
	}
	if r.client == nil {
		return nil, fmt.Errorf("kubernetes.io/csi: driver %s requires attaching, which needs an API server", vol.Driver)
	}
	name := attachmentName(vol.VolumeHandle, vol.Driver, r.nodeName)
	va, err := r.client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kubernetes.io/csi: attachment for %s failed: %w", vol.VolumeHandle, err)
	}
	if !va.Status.Attached {
		return nil, fmt.Errorf("kubernetes.io/csi: volume %s is not attached yet (VolumeAttachment %s)", vol.VolumeHandle, name)
	}
	return va.Status.AttachmentMetadata, nil
}

func nodeCapabilities(ctx context.Context, node csipb.NodeClient) (map[csipb.NodeServiceCapability_RPC_Type]bool, error) {
	resp, err := node.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{}, grpc.WaitForReady(false))
	if err != nil {
		return nil, err
	}
	out := map[csipb.NodeServiceCapability_RPC_Type]bool{}
	for _, c := range resp.GetCapabilities() {
		out[c.GetRpc().GetType()] = true
	}
	return out, nil
}

// volumeCapability is the mount capability with the access mode upstream
// derives from the PV's access modes.
func volumeCapability(vol Volume) *csipb.VolumeCapability {
	mode := csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	switch {
	case vol.Ephemeral:
	case slices.Contains(vol.AccessModes, v1.ReadWriteOncePod):
		mode = csipb.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
	case slices.Contains(vol.AccessModes, v1.ReadWriteMany):
		mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case slices.Contains(vol.AccessModes, v1.ReadOnlyMany) && !slices.Contains(vol.AccessModes, v1.ReadWriteOnce):
		mode = csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	}
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{FsType: vol.FSType, MountFlags: vol.MountOptions}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
	}
}

// fsGroupApplies is the CSIDriver's fsGroupPolicy: File always, None never,
// ReadWriteOnceWithFSType (the default) with an fsType and a RWO volume.
func fsGroupApplies(drv *storagev1.CSIDriver, vol Volume) bool {
	policy := storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy
	if drv != nil && drv.Spec.FSGroupPolicy != nil {
		policy = *drv.Spec.FSGroupPolicy
	}
	switch policy {
	case storagev1.FileFSGroupPolicy:
		return true
	case storagev1.NoneFSGroupPolicy:
		return false
	}
	return vol.FSType != "" && (vol.Ephemeral || slices.Contains(vol.AccessModes, v1.ReadWriteOnce))
}

// errNoDriver is returned when a volume names no driver.
var errNoDriver = errors.New("kubernetes.io/csi: the volume names no driver")

// Validate checks a Volume before SetUp.
func (v Volume) Validate() error {
	if v.Driver == "" {
		return errNoDriver
	}
	if v.VolumeHandle == "" {
		return errors.New("kubernetes.io/csi: the volume has no volumeHandle")
	}
	return nil
}

// Usage is a volume's NodeGetVolumeStats answer.
type Usage struct {
	CapacityBytes, AvailableBytes, UsedBytes uint64
	Inodes, InodesFree, InodesUsed           uint64
	HasInodes                                bool
}

// ErrStatsUnsupported is returned when the driver does not offer
// GET_VOLUME_STATS (upstream then reports no stats for the volume).
var ErrStatsUnsupported = errors.New("kubernetes.io/csi: the driver does not support NodeGetVolumeStats")

// ErrStatsPending is returned while the driver has not answered a volume's
// first stats query (within statsWait).
var ErrStatsPending = errors.New("kubernetes.io/csi: the driver has not answered NodeGetVolumeStats yet")

// statsTTL is how long a volume's NodeGetVolumeStats answer is reused: a
// stats read or a /metrics scrape does not call the driver each time
// (upstream measures volumes once per volumeStatsAggPeriod).
const statsTTL = 30 * time.Second

// volumeUsage is the last stats answer of one volume and the query running.
type volumeUsage struct {
	u   Usage
	err error
	at  time.Time // of the answer; zero: none yet
	// running is closed when the query running ends; nil when none runs.
	running chan struct{}
}

// VolumeStats is a published volume's usage, from the driver at most once per
// statsTTL. At most one query per volume runs at a time, bounded by the driver
// timeout and detached from ctx, so that scrapes of a hung driver leave
// nothing behind; a read waits for it until ctx ends or statsWait passes,
// then answers with the last usage known (ErrStatsPending without one). A
// read that finds a query running does not wait.
func (r *Registry) VolumeStats(ctx context.Context, driver, handle, path string) (Usage, error) {
	key := driver + "\x00" + handle + "\x00" + path
	r.mu.Lock()
	e := r.usage[key]
	if e == nil {
		e = &volumeUsage{}
		r.usage[key] = e
	}
	if !e.at.IsZero() && time.Since(e.at) < statsTTL {
		defer r.mu.Unlock()
		return e.u, e.err
	}
	wait := e.running == nil
	if wait {
		e.running = make(chan struct{})
		go func() {
			defer logging.HandleCrash(r.logger, "csi volume stats")
			r.queryStats(e, driver, handle, path)
		}()
	}
	done := e.running
	r.forgetStaleUsageLocked()
	r.mu.Unlock()
	if wait {
		timer := time.NewTimer(r.statsWait)
		defer timer.Stop()
		select {
		case <-done:
		case <-ctx.Done():
		case <-timer.C:
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.at.IsZero() {
		return Usage{}, ErrStatsPending
	}
	return e.u, e.err
}

// queryStats asks the driver once and records the answer in e.
func (r *Registry) queryStats(e *volumeUsage, driver, handle, path string) {
	ctx, cancel := context.WithTimeout(context.Background(), r.opTimeout)
	defer cancel()
	u, err := r.volumeStats(ctx, driver, handle, path)
	r.mu.Lock()
	defer r.mu.Unlock()
	e.u, e.err, e.at = u, err, time.Now()
	close(e.running)
	e.running = nil
}

// forgetStaleUsageLocked drops the volumes not asked about for a while.
func (r *Registry) forgetStaleUsageLocked() {
	for k, e := range r.usage {
		if e.running == nil && !e.at.IsZero() && time.Since(e.at) > 10*statsTTL {
			delete(r.usage, k)
		}
	}
}

func (r *Registry) volumeStats(ctx context.Context, driver, handle, path string) (Usage, error) {
	nc, err := r.connect(ctx, driver, "")
	if err != nil {
		return Usage{}, err
	}
	defer nc.close()
	node, caps := nc.node, nc.caps
	if !caps[csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS] {
		return Usage{}, ErrStatsUnsupported
	}
	resp, err := node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: handle, VolumePath: path})
	if err != nil {
		return Usage{}, fmt.Errorf("kubernetes.io/csi: NodeGetVolumeStats: %w", err)
	}
	var u Usage
	for _, x := range resp.GetUsage() {
		switch x.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			u.CapacityBytes, u.AvailableBytes, u.UsedBytes = uint64(x.GetTotal()), uint64(x.GetAvailable()), uint64(x.GetUsed())
		case csipb.VolumeUsage_INODES:
			u.Inodes, u.InodesFree, u.InodesUsed, u.HasInodes = uint64(x.GetTotal()), uint64(x.GetAvailable()), uint64(x.GetUsed()), true
		}
	}
	return u, nil
}
