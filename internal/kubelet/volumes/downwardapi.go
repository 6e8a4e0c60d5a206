package volumes

import (
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	for _, item := range src.Items {
		fp := fileProjection{Mode: defaultMode}
		if item.Mode != nil {
			fp.Mode = *item.Mode
		}
		var value string
		var err error
		switch {
		case item.FieldRef != nil:
			value, err = podFieldValue(pod, item.FieldRef.FieldPath)
		case item.ResourceFieldRef != nil:
			value, err = m.resourceFieldValue(pod, item.ResourceFieldRef)
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

// podFieldValue returns the value of a downwardAPI volume fieldRef: metadata.name,
// metadata.namespace, metadata.uid, metadata.labels, metadata.annotations (as sorted
// key="value" lines, values quoted Go-style, no trailing newline) and single
// metadata.labels['key'] / metadata.annotations['key'].
func podFieldValue(pod *v1.Pod, fieldPath string) (string, error) {
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

// resourceFieldValue returns a container's limit or request divided by the divisor
// (default 1) and rounded up. Unset (or zero) limits of cpu, memory and
// ephemeral-storage are the node's allocatable, as upstream.
func (m *Manager) resourceFieldValue(pod *v1.Pod, ref *v1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName == "" {
		return "", fmt.Errorf("resourceFieldRef %s needs a containerName", ref.Resource)
	}
	c := findContainer(pod, ref.ContainerName)
	if c == nil {
		return "", fmt.Errorf("container %s not found", ref.ContainerName)
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("unsupported container resource : %s", ref.Resource)
	}
	res := v1.ResourceName(name)
	switch {
	case res == v1.ResourceCPU, res == v1.ResourceMemory, res == v1.ResourceEphemeralStorage:
	case strings.HasPrefix(name, v1.ResourceHugePagesPrefix):
	default:
		return "", fmt.Errorf("unsupported container resource : %s", ref.Resource)
	}
	list := c.Resources.Requests
	if kind == "limits" {
		list = c.Resources.Limits
	}
	q := list[res]
	if kind == "limits" && q.IsZero() && !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
		alloc, err := m.allocatableList()
		if err != nil {
			return "", fmt.Errorf("node allocatable for %s: %w", ref.Resource, err)
		}
		q = alloc[res]
	}
	return divideCeil(res, q, ref.Divisor), nil
}

// divideCeil divides q by divisor (1 when zero) rounding up; CPU is compared in
// millicores so "250m" with divisor "1m" gives 250.
func divideCeil(res v1.ResourceName, q, divisor resource.Quantity) string {
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	var v float64
	if res == v1.ResourceCPU {
		v = math.Ceil(float64(q.MilliValue()) / float64(divisor.MilliValue()))
	} else {
		v = math.Ceil(float64(q.Value()) / float64(divisor.Value()))
	}
	return strconv.FormatInt(int64(v), 10)
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
