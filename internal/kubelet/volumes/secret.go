package volumes

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// collectSecret fetches the volume's secret and returns its files. A missing
// optional secret gives an empty volume.
func (m *Manager) collectSecret(ctx context.Context, pod *v1.Pod, src *v1.SecretVolumeSource) (map[string]fileProjection, error) {
	optional := isOptional(src.Optional)
	s, found, err := getSecret(ctx, m.objects, pod.Namespace, src.SecretName, optional)
	if err != nil {
		return nil, err
	}
	if !found {
		return map[string]fileProjection{}, nil
	}
	return secretPayload(s, src.Items, modeOr(src.DefaultMode), optional)
}

// secretPayload projects a secret's data keys (see keyPayload).
func secretPayload(s *v1.Secret, items []v1.KeyToPath, defaultMode int32, optional bool) (map[string]fileProjection, error) {
	return keyPayload(s.Data, items, defaultMode, optional, func(key string) error {
		return fmt.Errorf("secret %q references non-existent secret key: %s", s.Name, key)
	})
}
