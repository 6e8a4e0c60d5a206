package volumes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/volumes/csi"
)

// CSIVolumes publishes and unpublishes CSI volumes (csi.Registry).
type CSIVolumes interface {
	SetUp(ctx context.Context, pod *v1.Pod, vol csi.Volume, dir string, fsGroup *int64, own func(dir string, fsGroup *int64) error) (string, error)
	TearDown(ctx context.Context, dir string, stillPublished func(driver, handle string) bool) error
	// SetUpBlock and TearDownBlock map and unmap a volumeMode Block volume
	// (link: <pod>/volumeDevices/kubernetes.io~csi/<spec name>).
	SetUpBlock(ctx context.Context, pod *v1.Pod, vol csi.Volume, link string) (string, error)
	TearDownBlock(ctx context.Context, podUID, link string) error
	// NodeExpand grows a published volume; StagingPath, BlockStagingPath
	// and BlockPublishPath name its paths.
	NodeExpand(ctx context.Context, e csi.Expansion) error
	StagingPath(vol csi.Volume) string
	BlockStagingPath(specName string) string
	BlockPublishPath(specName, podUID string) string
}

// ownWith is the fsGroup change of a writable CSI volume (upstream's, with the
// pod's fsGroupChangePolicy).
func ownWith(pod *v1.Pod) func(string, *int64) error {
	return func(dir string, fsGroup *int64) error {
		return setVolumeOwnershipPolicy(dir, fsGroup, fsGroupChangePolicyOf(pod))
	}
}

// csiPV is the CSI volume of a PV, with its secrets read.
func (m *Manager) csiPV(ctx context.Context, pv *v1.PersistentVolume, claimReadOnly bool) (csi.Volume, error) {
	src := pv.Spec.CSI
	vol := csi.Volume{SpecName: pv.Name, Driver: src.Driver, VolumeHandle: src.VolumeHandle, FSType: src.FSType,
		ReadOnly: src.ReadOnly || claimReadOnly, Attributes: src.VolumeAttributes, AccessModes: pv.Spec.AccessModes, MountOptions: pv.Spec.MountOptions}
	if err := vol.Validate(); err != nil {
		return vol, err
	}
	var err error
	if vol.StageSecrets, err = m.secretData(ctx, src.NodeStageSecretRef); err != nil {
		return vol, err
	}
	if vol.PublishSecrets, err = m.secretData(ctx, src.NodePublishSecretRef); err != nil {
		return vol, err
	}
	return vol, nil
}

// setUpCSIPV publishes a PV's CSI volume for the pod: under
// <pod>/volumes/kubernetes.io~csi/<pv>/mount, or with volumeMode Block as
// the device <pod>/volumeDevices/kubernetes.io~csi/<pv>. It returns the
// expansion that grows it when its claim was resized (expandClaim, once the
// claim volume is remembered).
func (m *Manager) setUpCSIPV(ctx context.Context, pod *v1.Pod, bc *boundClaim) (VolumeInfo, csi.Expansion, error) {
	pv := bc.latestPV()
	vol, err := m.csiPV(ctx, pv, bc.readOnly)
	if err != nil {
		return VolumeInfo{}, csi.Expansion{}, err
	}
	var info VolumeInfo
	exp := csi.Expansion{Volume: vol}
	if isBlock(pv) {
		link := filepath.Join(m.podDir(pod.UID), "volumeDevices", csi.PodDeviceDir, vol.SpecName)
		dev, err := m.csi.SetUpBlock(ctx, pod, vol, link)
		if err != nil {
			return VolumeInfo{}, exp, err
		}
		info = VolumeInfo{Device: dev, ReadOnly: vol.ReadOnly}
		exp.Block, exp.VolumePath, exp.StagingPath = true, m.csi.BlockPublishPath(vol.SpecName, string(pod.UID)), m.csi.BlockStagingPath(vol.SpecName)
	} else {
		if info, err = m.setUpCSI(ctx, pod, vol); err != nil {
			return VolumeInfo{}, exp, err
		}
		exp.VolumePath, exp.StagingPath = info.HostPath, m.csi.StagingPath(vol)
	}
	return info, exp, nil
}

// setUpInlineCSI publishes a pod's inline (ephemeral) CSI volume.
func (m *Manager) setUpInlineCSI(ctx context.Context, pod *v1.Pod, name string, src *v1.CSIVolumeSource) (VolumeInfo, error) {
	vol := csi.Volume{SpecName: name, Driver: src.Driver, VolumeHandle: csi.EphemeralHandle(string(pod.UID), name),
		ReadOnly: src.ReadOnly != nil && *src.ReadOnly, Attributes: src.VolumeAttributes, Ephemeral: true}
	if src.FSType != nil {
		vol.FSType = *src.FSType
	}
	if err := vol.Validate(); err != nil {
		return VolumeInfo{}, err
	}
	if ref := src.NodePublishSecretRef; ref != nil {
		var err error
		if vol.PublishSecrets, err = m.secretData(ctx, &v1.SecretReference{Namespace: pod.Namespace, Name: ref.Name}); err != nil {
			return VolumeInfo{}, err
		}
	}
	return m.setUpCSI(ctx, pod, vol)
}

func (m *Manager) setUpCSI(ctx context.Context, pod *v1.Pod, vol csi.Volume) (VolumeInfo, error) {
	dir := m.volumePath(pod.UID, csi.PodPluginDir, vol.SpecName)
	target, err := m.csi.SetUp(ctx, pod, vol, dir, fsGroupOf(pod), ownWith(pod))
	if err != nil {
		return VolumeInfo{}, err
	}
	return VolumeInfo{HostPath: target, ReadOnly: vol.ReadOnly}, nil
}

// secretData reads a CSI secret reference's data; nil without one.
func (m *Manager) secretData(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	if m.objects == nil {
		return nil, errors.New("CSI secrets need an API server")
	}
	s, _, err := getSecret(ctx, m.objects, ref.Namespace, ref.Name, false)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// tearDownCSI unpublishes the pod's CSI volumes (and unstages those no
// other pod publishes); the caller holds the pod.
func (m *Manager) tearDownCSI(ctx context.Context, uid k8stypes.UID) error {
	return m.eachCSIVolume(uid, filepath.Join(m.volumesDir(uid), csi.PodPluginDir), "CSI volume", func(vdir string) error {
		if _, err := os.Stat(filepath.Join(vdir, "vol_data.json")); err != nil {
			return nil // nothing published (removeTree takes the rest)
		}
		still := func(driver, handle string) bool { return m.csiPublishedElsewhere(uid, driver, handle) }
		return m.csi.TearDown(ctx, vdir, still)
	})
}

// tearDownCSIBlock unmaps the pod's CSI block volumes (the links under
// <pod>/volumeDevices/kubernetes.io~csi); the caller holds the pod.
func (m *Manager) tearDownCSIBlock(ctx context.Context, uid k8stypes.UID) error {
	return m.eachCSIVolume(uid, filepath.Join(m.podDir(uid), "volumeDevices", csi.PodDeviceDir), "CSI block volume", func(link string) error {
		return m.csi.TearDownBlock(ctx, string(uid), link)
	})
}

// eachCSIVolume runs tearDown on each entry of the pod's CSI directory dir
// (none: nothing to do), each failure named by kind and entry.
func (m *Manager) eachCSIVolume(uid k8stypes.UID, dir, kind string, tearDown func(path string) error) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if m.csi == nil {
		return fmt.Errorf("pod %s has %ss and this kubelet has no CSI support", uid, kind)
	}
	var errs []error
	for _, e := range entries {
		if err := tearDown(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", kind, e.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// csiPublishedElsewhere reports whether a pod other than uid publishes the
// driver's volume handle.
func (m *Manager) csiPublishedElsewhere(uid k8stypes.UID, driver, handle string) bool {
	pods, err := os.ReadDir(m.podsDir)
	if err != nil {
		return false
	}
	for _, p := range pods {
		if k8stypes.UID(p.Name()) == uid {
			continue
		}
		vols, err := os.ReadDir(filepath.Join(m.volumesDir(k8stypes.UID(p.Name())), csi.PodPluginDir))
		if err != nil {
			continue
		}
		for _, v := range vols {
			d, h, err := csi.VolumeOf(filepath.Join(m.volumesDir(k8stypes.UID(p.Name())), csi.PodPluginDir, v.Name()))
			if err == nil && d == driver && h == handle {
				return true
			}
		}
	}
	return false
}
