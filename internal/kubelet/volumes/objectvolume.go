package volumes

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
)

// Plugin directory names of the API-backed volumes (upstream's escaped plugin names).
const (
	ConfigMapPluginDir = "kubernetes.io~configmap"
	SecretPluginDir    = "kubernetes.io~secret"
	ProjectedPluginDir = "kubernetes.io~projected"
)

// objectVolume is the content of a configMap, secret or projected volume, collected
// from the API before the Manager's lock is taken.
type objectVolume struct {
	kind      string // "configMap", "secret", "projected"
	pluginDir string
	tmpfs     bool // secrets and projected volumes (they may hold secrets and tokens)
	payload   map[string]fileProjection
	err       error
}

// collectObjectVolumes reads, for every configMap, secret and projected volume of
// the pod, the objects and tokens it projects; nil when the Manager has no
// Objects. It runs without the Manager's lock so that slow API calls for one pod
// do not hold up the volumes of the others.
func (m *Manager) collectObjectVolumes(ctx context.Context, pod *v1.Pod) map[string]*objectVolume {
	if m.objects == nil {
		return nil
	}
	out := map[string]*objectVolume{}
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		src := &vol.VolumeSource
		var ov *objectVolume
		switch {
		case src.ConfigMap != nil:
			ov = &objectVolume{kind: "configMap", pluginDir: ConfigMapPluginDir}
			ov.payload, ov.err = m.collectConfigMap(ctx, pod, src.ConfigMap)
		case src.Secret != nil:
			ov = &objectVolume{kind: "secret", pluginDir: SecretPluginDir, tmpfs: true}
			ov.payload, ov.err = m.collectSecret(ctx, pod, src.Secret)
		case src.Projected != nil:
			ov = &objectVolume{kind: "projected", pluginDir: ProjectedPluginDir, tmpfs: true}
			ov.payload, ov.err = m.collectProjected(ctx, pod, vol.Name, src.Projected)
		default:
			continue
		}
		out[vol.Name] = ov
	}
	return out
}

// setUpObjectVolume writes a collected volume: the directory (a tmpfs for secret
// and projected volumes, created once), the fsGroup on a new volume, then the files
// through the atomic writer, which does nothing when they did not change.
//
// When collecting failed but the volume already holds data from an earlier sync
// (an API hiccup, an object deleted under a running pod), the data is kept, the
// error is logged and the volume counts as set up, as upstream where a failed
// remount does not stop a running pod. A volume never set up fails with the error.
func (m *Manager) setUpObjectVolume(pod *v1.Pod, name string, ov *objectVolume) (VolumeInfo, error) {
	dir := m.volumePath(pod.UID, ov.pluginDir, name)
	info := VolumeInfo{HostPath: dir, ReadOnly: true, Managed: true}
	if ov.err != nil {
		if !hasData(dir) {
			return VolumeInfo{}, ov.err
		}
		m.logger.Warn("Could not refresh volume; keeping its current content",
			zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("volume", name), zap.Error(ov.err))
		return info, nil
	}
	var fresh bool
	var err error
	if ov.tmpfs {
		fresh, err = m.setupTmpfs(dir, m.memoryVolumeSize(pod, 0))
	} else {
		fresh, err = setupDir(dir)
	}
	if err != nil {
		return VolumeInfo{}, err
	}
	if fresh {
		if err := setVolumeOwnership(dir, fsGroupOf(pod), true); err != nil {
			return VolumeInfo{}, err
		}
	}
	if err := m.writeVolumeFiles(pod, dir, ov.payload); err != nil {
		return VolumeInfo{}, fmt.Errorf("write %s files: %w", ov.kind, err)
	}
	return info, nil
}

// writeVolumeFiles writes payload into dir atomically, giving the files to the
// pod's fsGroup (group read) when it has one.
func (m *Manager) writeVolumeFiles(pod *v1.Pod, dir string, payload map[string]fileProjection) error {
	w := &atomicWriter{dir: dir, logger: m.logger}
	var setPerms func(string) error
	if fsGroup := fsGroupOf(pod); fsGroup != nil {
		w.modeExtra = roMask
		setPerms = func(tsDir string) error { return setVolumeOwnership(tsDir, fsGroup, true) }
	}
	return w.Write(payload, setPerms)
}

// hasData reports whether the atomic writer has written dir at least once.
func hasData(dir string) bool {
	_, err := os.Lstat(filepath.Join(dir, dataDirName))
	return err == nil
}
