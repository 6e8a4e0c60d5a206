package csi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// Directories of upstream's CSI block volumes (volumeMode Block):
//
//	<root>/plugins/kubernetes.io/csi/volumeDevices/staging/<spec name>         NodeStageVolume's staging path
//	<root>/plugins/kubernetes.io/csi/volumeDevices/publish/<spec name>/<pod>   NodePublishVolume's target (a file the driver puts the device on)
//	<root>/plugins/kubernetes.io/csi/volumeDevices/<spec name>/data/vol_data.json
//	<root>/plugins/kubernetes.io/csi/volumeDevices/<spec name>/dev/<pod>      the device bind-mounted, a loop device on it (the global map path)
//	<pod>/volumeDevices/kubernetes.io~csi/<spec name>                          a symlink to the pod's publish path
const (
	volumeDevicesDir = "volumeDevices"
	// PodDeviceDir holds a pod's CSI block volumes under <pod>/volumeDevices.
	PodDeviceDir = PodPluginDir
)

func (r *Registry) blockDir() string {
	return filepath.Join(r.rootDir, "plugins", PluginName, volumeDevicesDir)
}

// BlockStagingPath and BlockPublishPath are a block volume's staging
// directory and the pod's publish file.
func (r *Registry) BlockStagingPath(specName string) string {
	return filepath.Join(r.blockDir(), "staging", specName)
}

func (r *Registry) BlockPublishPath(specName, podUID string) string {
	return filepath.Join(r.blockDir(), "publish", specName, podUID)
}

func (r *Registry) blockDataDir(specName string) string {
	return filepath.Join(r.blockDir(), specName, "data")
}

// blockGlobalMapPath is the volume's global map path: each pod's device
// is bind-mounted on a file named by its UID there.
func (r *Registry) blockGlobalMapPath(specName string) string {
	return filepath.Join(r.blockDir(), specName, "dev")
}

// SetUpBlock makes a volumeMode Block CSI volume a device for the pod: the
// volume is staged once per node on its staging directory (when the driver
// stages), published on the pod's publish file (NodePublishVolume with a
// block capability), and link (<pod>/volumeDevices/kubernetes.io~csi/<spec
// name>) points at it; the device is then bind-mounted on the pod's file of
// the global map path and held open by a loop device (lockBlockDevice). It
// returns link, which resolves to the device node the driver put there. A
// volume already published and mapped is left alone.
func (r *Registry) SetUpBlock(ctx context.Context, pod *v1.Pod, vol Volume, link string) (string, error) {
	if vol.Ephemeral {
		return "", errors.New("kubernetes.io/csi: inline CSI volumes cannot be block devices")
	}
	publish := r.BlockPublishPath(vol.SpecName, string(pod.UID))
	globalMap := r.blockGlobalMapPath(vol.SpecName)
	mapFile := filepath.Join(globalMap, string(pod.UID))
	if r.isDone(publish) && r.isDone(mapFile) && isLinkTo(link, publish) {
		return link, nil
	}
	ctx, unlock, err := r.volumeOp(ctx, vol.Driver, vol.VolumeHandle)
	if err != nil {
		return "", err
	}
	defer unlock()
	nc, err := r.connect(ctx, vol.Driver, "blockMapper.SetUpDevice failed to get CSI client")
	if err != nil {
		return "", err
	}
	defer nc.close()
	drv, publishCtx, err := r.admit(ctx, vol)
	if err != nil {
		return "", err
	}
	node, caps := nc.node, nc.caps
	capability := blockCapability(vol)
	// The pod's link comes first: teardown finds the volume by it, also when
	// staging or publishing fails midway (the link may dangle till then).
	if err := os.MkdirAll(filepath.Dir(link), 0o750); err != nil {
		return "", err
	}
	if !isLinkTo(link, publish) {
		_ = os.Remove(link)
		if err := os.Symlink(publish, link); err != nil {
			return "", fmt.Errorf("kubernetes.io/csi: map block volume: %w", err)
		}
	}
	if err := writeVolData(r.blockDataDir(vol.SpecName), volData{SpecVolID: vol.SpecName, VolumeHandle: vol.VolumeHandle, DriverName: vol.Driver,
		NodeName: r.nodeName, AttachmentID: attachmentName(vol.VolumeHandle, vol.Driver, r.nodeName),
		VolumeLifecycleMode: string(storagev1.VolumeLifecyclePersistent)}); err != nil {
		return "", err
	}
	staging := ""
	if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		staging = r.BlockStagingPath(vol.SpecName)
		if !r.isDone(staging) {
			if err := os.MkdirAll(staging, 0o750); err != nil {
				return "", err
			}
			if _, err := node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{VolumeId: vol.VolumeHandle, PublishContext: publishCtx,
				StagingTargetPath: staging, VolumeCapability: capability, Secrets: vol.StageSecrets, VolumeContext: vol.Attributes}); err != nil {
				return "", fmt.Errorf("kubernetes.io/csi: blockMapper.stageVolumeForBlock failed: %w", err)
			}
			r.markDone(staging, true)
		}
	}
	if err := os.MkdirAll(filepath.Dir(publish), 0o750); err != nil {
		return "", err
	}
	if !r.isDone(publish) {
		if _, err := node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{VolumeId: vol.VolumeHandle, PublishContext: publishCtx,
			StagingTargetPath: staging, TargetPath: publish, VolumeCapability: capability, Readonly: vol.ReadOnly,
			Secrets: vol.PublishSecrets, VolumeContext: podInfoContext(drv, pod, vol)}); err != nil {
			return "", fmt.Errorf("kubernetes.io/csi: blockMapper.publishVolumeForBlock failed: %w", err)
		}
		r.markDone(publish, true)
	}
	if fi, err := os.Stat(publish); err != nil || fi.Mode()&fs.ModeDevice == 0 || fi.Mode()&fs.ModeCharDevice != 0 {
		// Undone now; the link stays for the pod's teardown otherwise.
		if _, uerr := node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: vol.VolumeHandle, TargetPath: publish}); uerr == nil {
			r.markDone(publish, false)
		}
		return "", fmt.Errorf("kubernetes.io/csi: the driver published no block device at %s (%v)", publish, err)
	}
	if err := lockBlockDevice(publish, globalMap, string(pod.UID)); err != nil {
		return "", err
	}
	r.markDone(mapFile, true)
	return link, nil
}

// TearDownBlock unpublishes the pod's block volume whose link is given
// (NodeUnpublishVolume on its publish file), removes the link, and
// unstages the volume once no pod publishes it.
func (r *Registry) TearDownBlock(ctx context.Context, podUID, link string) error {
	specName := filepath.Base(link)
	data, err := readVolData(r.blockDataDir(specName))
	if errors.Is(err, fs.ErrNotExist) {
		// SetUpBlock stopped before anything reached the driver.
		if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	ctx, unlock, err := r.volumeOp(ctx, data.DriverName, data.VolumeHandle)
	if err != nil {
		return err
	}
	defer unlock()
	nc, err := r.connect(ctx, data.DriverName, "blockMapper.UnmapPodDevice failed")
	if err != nil {
		return err
	}
	defer nc.close()
	publish := r.BlockPublishPath(specName, podUID)
	// The loop device and the bind mount first, as upstream's
	// UnmapBlockVolume: they hold the published device.
	globalMap := r.blockGlobalMapPath(specName)
	if err := unlockBlockDevice(globalMap, podUID); err != nil {
		return err
	}
	r.markDone(filepath.Join(globalMap, podUID), false)
	// Always unpublished, as upstream: an earlier NodePublishVolume may have
	// timed out and left something behind without the file.
	if err := r.unpublish(ctx, nc, data.VolumeHandle, publish, "blockMapper.unpublishVolumeForBlock failed"); err != nil {
		return err
	}
	if err := os.Remove(publish); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Remove(link); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	publishDir := filepath.Dir(publish)
	others, err := os.ReadDir(publishDir)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("kubernetes.io/csi: list the publishers of %s: %w", specName, err)
	case len(others) > 0:
		return nil // another pod publishes it
	}
	_ = os.Remove(publishDir)
	staging := r.BlockStagingPath(specName)
	if _, err := os.Stat(staging); err == nil {
		if err := r.unstage(ctx, nc, data.VolumeHandle, staging, "blockMapper.unstageVolumeForBlock failed"); err != nil {
			return err
		}
		if err := os.RemoveAll(staging); err != nil {
			return err
		}
	}
	return os.RemoveAll(filepath.Dir(r.blockDataDir(specName)))
}

// isLinkTo says whether link is a symlink to target.
func isLinkTo(link, target string) bool {
	got, err := os.Readlink(link)
	return err == nil && got == target
}

// blockCapability is the block access type with the access mode of the
// volume's access modes.
func blockCapability(vol Volume) *csipb.VolumeCapability {
	c := volumeCapability(vol)
	c.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	return c
}

// podInfoContext is the volume context of a publish: the volume's
// attributes, with the pod's name, namespace, UID and service account when
// the CSIDriver asks for pod info (podInfoOnMount), and the ephemeral key.
func podInfoContext(drv *storagev1.CSIDriver, pod *v1.Pod, vol Volume) map[string]string {
	volCtx := map[string]string{}
	for k, v := range vol.Attributes {
		volCtx[k] = v
	}
	if drv != nil && drv.Spec.PodInfoOnMount != nil && *drv.Spec.PodInfoOnMount {
		volCtx["csi.storage.k8s.io/pod.name"] = pod.Name
		volCtx["csi.storage.k8s.io/pod.namespace"] = pod.Namespace
		volCtx["csi.storage.k8s.io/pod.uid"] = string(pod.UID)
		volCtx["csi.storage.k8s.io/serviceAccount.name"] = pod.Spec.ServiceAccountName
		volCtx[ephemeralKey] = fmt.Sprint(vol.Ephemeral)
	} else if vol.Ephemeral {
		volCtx[ephemeralKey] = "true"
	}
	return volCtx
}
