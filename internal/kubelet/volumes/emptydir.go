package volumes

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// emptyDirPerm is the mode of an emptyDir (upstream's: writable by any container user).
const emptyDirPerm os.FileMode = 0o777

// setUpEmptyDir creates the volume directory and, for medium Memory, mounts a tmpfs on
// it (once; an existing tmpfs is kept). A newly created volume gets the pod's fsGroup.
func (m *Manager) setUpEmptyDir(pod *v1.Pod, name string, src *v1.EmptyDirVolumeSource) (VolumeInfo, error) {
	dir := m.volumePath(pod.UID, EmptyDirPluginDir, name)
	var fresh bool
	var err error
	switch src.Medium {
	case v1.StorageMediumDefault:
		fresh, err = setupDir(dir)
	case v1.StorageMediumMemory:
		var size int64
		if src.SizeLimit != nil {
			size = src.SizeLimit.Value()
		}
		fresh, err = m.setupTmpfs(dir, m.memoryVolumeSize(pod, size))
	default:
		err = fmt.Errorf("emptyDir medium %q is not supported", src.Medium)
	}
	if err != nil {
		return VolumeInfo{}, err
	}
	if fresh {
		if err := setVolumeOwnership(dir, fsGroupOf(pod), false); err != nil {
			return VolumeInfo{}, err
		}
	}
	return VolumeInfo{HostPath: dir, Managed: true}, nil
}

// setupDir creates dir (0777 whatever the umask; parents 0750) and reports whether it
// was created now.
func setupDir(dir string) (bool, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		return false, fmt.Errorf("create %s: %w", filepath.Dir(dir), err)
	}
	created := true
	if err := os.Mkdir(dir, emptyDirPerm); err != nil {
		if !errors.Is(err, os.ErrExist) {
			return false, fmt.Errorf("create %s: %w", dir, err)
		}
		created = false
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return false, fmt.Errorf("stat %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s exists and is not a directory", dir)
	}
	if created && fi.Mode().Perm() != emptyDirPerm {
		if err := os.Chmod(dir, emptyDirPerm); err != nil {
			return false, fmt.Errorf("chmod %s: %w", dir, err)
		}
	}
	return created, nil
}

// setupTmpfs makes dir a tmpfs mount point of sizeBytes (0: kernel default); a tmpfs
// already there is kept. It reports whether the tmpfs was mounted now.
func (m *Manager) setupTmpfs(dir string, sizeBytes int64) (bool, error) {
	if _, err := setupDir(dir); err != nil {
		return false, err
	}
	fsType, err := mountFSType(dir)
	if err != nil {
		return false, err
	}
	switch fsType {
	case "tmpfs":
		return false, nil
	case "":
	default:
		return false, fmt.Errorf("%s is already a %s mount point", dir, fsType)
	}
	if err := mountTmpfs(dir, sizeBytes); err != nil {
		return false, err
	}
	return true, nil
}

// memoryVolumeSize is the tmpfs size of a memory-backed volume (upstream's rule): the
// node's allocatable memory, lowered to the pod's memory limit, lowered to the
// volume's sizeLimit. 0 means no size option (kernel default).
func (m *Manager) memoryVolumeSize(pod *v1.Pod, sizeLimit int64) int64 {
	size := m.allocatableMemory()
	lower := func(v int64) {
		if v > 0 && (size == 0 || v <= size) {
			size = v
		}
	}
	lower(podMemoryLimit(pod))
	lower(sizeLimit)
	return size
}

// podMemoryLimit is the pod's effective memory limit in bytes (the sum of the app and
// sidecar containers' limits, or the largest init container's if larger, plus the
// pod overhead), or 0 when some container has no memory limit.
func podMemoryLimit(pod *v1.Pod) int64 {
	limitOf := func(c *v1.Container) (int64, bool) {
		q, ok := c.Resources.Limits[v1.ResourceMemory]
		if !ok || q.IsZero() {
			return 0, false
		}
		return q.Value(), true
	}
	var sum, maxInit int64
	for i := range pod.Spec.Containers {
		v, ok := limitOf(&pod.Spec.Containers[i])
		if !ok {
			return 0
		}
		sum += v
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		v, ok := limitOf(c)
		if !ok {
			return 0
		}
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			sum += v
		} else {
			maxInit = max(maxInit, v)
		}
	}
	limit := max(sum, maxInit)
	if q, ok := pod.Spec.Overhead[v1.ResourceMemory]; ok && limit > 0 {
		limit += q.Value()
	}
	return limit
}

func fsGroupOf(pod *v1.Pod) *int64 {
	if pod.Spec.SecurityContext == nil {
		return nil
	}
	return pod.Spec.SecurityContext.FSGroup
}
