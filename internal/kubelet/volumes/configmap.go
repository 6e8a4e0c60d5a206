package volumes

import (
	"context"
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// defaultObjectVolumeMode is the file mode of configMap, secret and projected files
// when neither the item nor the volume sets one (the API's default, 0644).
const defaultObjectVolumeMode int32 = 0o644

// collectConfigMap fetches the volume's configMap and returns its files. A missing
// optional configMap gives an empty volume.
func (m *Manager) collectConfigMap(ctx context.Context, pod *v1.Pod, src *v1.ConfigMapVolumeSource) (map[string]fileProjection, error) {
	optional := isOptional(src.Optional)
	cm, found, err := getConfigMap(ctx, m.objects, pod.Namespace, src.Name, optional)
	if err != nil {
		return nil, err
	}
	if !found {
		return map[string]fileProjection{}, nil
	}
	return configMapPayload(cm, src.Items, modeOr(src.DefaultMode), optional)
}

// configMapPayload projects a configMap's data and binaryData keys (see keyPayload).
func configMapPayload(cm *v1.ConfigMap, items []v1.KeyToPath, defaultMode int32, optional bool) (map[string]fileProjection, error) {
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	return keyPayload(data, items, defaultMode, optional, func(key string) error {
		return fmt.Errorf("configmap %q references non-existent config key: %s", cm.Name, key)
	})
}

// keyPayload projects the keys of an object. Without items every key becomes a file
// of that name with defaultMode. With items each item's key is written at its path,
// with the item's mode or else defaultMode; a key the object lacks is skipped when
// the source is optional and is an error (missing(key)) otherwise.
func keyPayload(data map[string][]byte, items []v1.KeyToPath, defaultMode int32, optional bool, missing func(key string) error) (map[string]fileProjection, error) {
	if len(items) == 0 {
		payload := make(map[string]fileProjection, len(data))
		for k, v := range data {
			payload[k] = fileProjection{Data: v, Mode: defaultMode}
		}
		return payload, nil
	}
	payload := make(map[string]fileProjection, len(items))
	for _, item := range items {
		v, ok := data[item.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, missing(item.Key)
		}
		fp := fileProjection{Data: v, Mode: defaultMode}
		if item.Mode != nil {
			fp.Mode = *item.Mode
		}
		payload[filepath.Clean(item.Path)] = fp
	}
	return payload, nil
}

func isOptional(p *bool) bool { return p != nil && *p }

// modeOr returns *mode, or the default 0644 when unset.
func modeOr(mode *int32) int32 {
	if mode == nil {
		return defaultObjectVolumeMode
	}
	return *mode
}
