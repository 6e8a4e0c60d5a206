package volumes

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/resources"
)

// defaultDownwardAPIMode is the file mode when neither the item nor the volume sets one.
const defaultDownwardAPIMode int32 = 0o644

// setUpDownwardAPI collects the volume's data first (a bad item fails before anything
// is touched), then makes the volume directory a tmpfs (like upstream, which wraps a
// memory-backed emptyDir) and writes the files atomically.
func (m *Manager) setUpDownwardAPI(pod *v1.Pod, name string, src *v1.DownwardAPIVolumeSource) (VolumeInfo, error) {
	payload, err := m.collectDownwardAPI(pod, src)
	if err != nil {
		return VolumeInfo{}, err
	}
	dir := m.volumePath(pod.UID, DownwardAPIPluginDir, name)
	fresh, err := m.setupTmpfs(dir, m.memoryVolumeSize(pod, 0))
	if err != nil {
		return VolumeInfo{}, err
	}
	fsGroup := fsGroupOf(pod)
	if fresh {
		if err := setVolumeOwnership(dir, fsGroup, true); err != nil {
			return VolumeInfo{}, err
		}
	}
	w := &atomicWriter{dir: dir, logger: m.logger}
	var setPerms func(string) error
	if fsGroup != nil {
		w.modeExtra = roMask
		setPerms = func(tsDir string) error { return setVolumeOwnership(tsDir, fsGroup, true) }
	}
	if err := w.Write(payload, setPerms); err != nil {
		return VolumeInfo{}, fmt.Errorf("write downwardAPI files: %w", err)
	}
	return VolumeInfo{HostPath: dir, ReadOnly: true, Managed: true}, nil
}

// collectDownwardAPI builds the payload: one file per item, with the item's mode, else
// the volume's defaultMode, else 0644. Errors of all items are joined.
func (m *Manager) collectDownwardAPI(pod *v1.Pod, src *v1.DownwardAPIVolumeSource) (map[string]fileProjection, error) {
	defaultMode := defaultDownwardAPIMode
	if src.DefaultMode != nil {
		defaultMode = *src.DefaultMode
	}
	payload := make(map[string]fileProjection, len(src.Items))
	var errs []error
	var alloc v1.ResourceList // the node's allocatable, copied once per payload
	for _, item := range src.Items {
		fp := fileProjection{Mode: defaultMode}
		if item.Mode != nil {
			fp.Mode = *item.Mode
		}
		var value string
		var err error
		switch {
		case item.FieldRef != nil:
			value, err = PodFieldValue(pod, item.FieldRef.FieldPath)
		case item.ResourceFieldRef != nil:
			if alloc == nil {
				alloc = m.allocatable()
			}
			value, err = resources.ResolveFieldRef(item.ResourceFieldRef, pod, nil, alloc)
		default:
			err = errors.New("neither fieldRef nor resourceFieldRef is set")
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("item %q: %w", item.Path, err))
			continue
		}
		fp.Data = []byte(value)
		payload[filepath.Clean(item.Path)] = fp
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return payload, nil
}

// PodFieldValue returns the value of a downward API metadata fieldRef (a
// downwardAPI volume item or an env variable): metadata.name,
// metadata.namespace, metadata.uid, metadata.labels, metadata.annotations (as sorted
// key="value" lines, values quoted Go-style, no trailing newline) and single
// metadata.labels['key'] / metadata.annotations['key'].
func PodFieldValue(pod *v1.Pod, fieldPath string) (string, error) {
	if path, key, ok := splitSubscript(fieldPath); ok {
		switch path {
		case "metadata.labels":
			return pod.Labels[key], nil
		case "metadata.annotations":
			return pod.Annotations[key], nil
		}
		return "", fmt.Errorf("fieldPath %q does not support subscript", fieldPath)
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return FormatMap(pod.Labels), nil
	case "metadata.annotations":
		return FormatMap(pod.Annotations), nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %s", fieldPath)
}

// splitSubscript splits "metadata.labels['key']" into ("metadata.labels", "key").
func splitSubscript(fieldPath string) (path, key string, ok bool) {
	rest, found := strings.CutSuffix(fieldPath, "']")
	if !found {
		return fieldPath, "", false
	}
	path, key, found = strings.Cut(rest, "['")
	if !found || path == "" {
		return fieldPath, "", false
	}
	return path, key, true
}

// FormatMap renders labels or annotations the way the downward API does: one
// key="value" line per entry, keys sorted, values quoted with Go's %q escaping, lines
// joined by "\n" without a trailing newline.
func FormatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, k+"="+strconv.Quote(m[k]))
	}
	return strings.Join(lines, "\n")
}
