package volumes

import (
	"context"
	"errors"
	"fmt"
	"maps"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
)

// defaultTokenExpirationSeconds is the lifetime asked for a projected service
// account token that does not set expirationSeconds (the API's default).
const defaultTokenExpirationSeconds int64 = 3600

// tokenModeWithFSGroup is the mode of a token or trust bundle file when the
// pod has an fsGroup; the ownership step then adds group read (0640), as
// upstream.
const tokenModeWithFSGroup int32 = 0o600

// collectProjected returns the files of every source of a projected volume, in
// order (a later source wins a path). Errors of all sources are joined.
func (m *Manager) collectProjected(ctx context.Context, pod *v1.Pod, volume string, src *v1.ProjectedVolumeSource) (map[string]fileProjection, error) {
	defaultMode := modeOr(src.DefaultMode)
	payload := map[string]fileProjection{}
	var errs []error
	for i := range src.Sources {
		files, err := m.collectProjection(ctx, pod, volume, i, &src.Sources[i], defaultMode)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		maps.Copy(payload, files)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return payload, nil
}

// collectProjection returns the files of source index of the pod's
// projected volume.
func (m *Manager) collectProjection(ctx context.Context, pod *v1.Pod, volume string, index int, s *v1.VolumeProjection, defaultMode int32) (map[string]fileProjection, error) {
	switch {
	case s.ConfigMap != nil:
		optional := isOptional(s.ConfigMap.Optional)
		cm, found, err := getConfigMap(ctx, m.objects, pod.Namespace, s.ConfigMap.Name, optional)
		if err != nil || !found {
			return nil, err
		}
		return configMapPayload(cm, s.ConfigMap.Items, defaultMode, optional)
	case s.Secret != nil:
		optional := isOptional(s.Secret.Optional)
		sec, found, err := getSecret(ctx, m.objects, pod.Namespace, s.Secret.Name, optional)
		if err != nil || !found {
			return nil, err
		}
		return secretPayload(sec, s.Secret.Items, defaultMode, optional)
	case s.DownwardAPI != nil:
		return m.collectDownwardAPI(pod, &v1.DownwardAPIVolumeSource{Items: s.DownwardAPI.Items, DefaultMode: &defaultMode})
	case s.ServiceAccountToken != nil:
		return m.collectToken(ctx, pod, s.ServiceAccountToken, defaultMode)
	case s.ClusterTrustBundle != nil:
		return m.collectTrustBundle(ctx, pod, s.ClusterTrustBundle, defaultMode)
	case s.PodCertificate != nil:
		return m.collectPodCertificate(ctx, pod, volume, index, s.PodCertificate, defaultMode)
	}
	return nil, errors.New("projected volume source without a type")
}

// collectPodCertificate returns the files of the podCertificate source at
// index of the pod's volume: the private key and certificate chain the
// signer issued (waiting for the first issuance), as one credential bundle
// (key then chain) and/or as separate files; mode 0600 when the pod has an
// fsGroup, as upstream.
func (m *Manager) collectPodCertificate(ctx context.Context, pod *v1.Pod, volume string, index int, p *v1.PodCertificateProjection, defaultMode int32) (map[string]fileProjection, error) {
	if m.podCerts == nil {
		return nil, errors.New("podCertificate projections need the API server and the PodCertificateRequest feature gate")
	}
	key, chain, err := m.podCerts.CredentialBundle(ctx, pod, volume, index, p.SignerName)
	if err != nil {
		return nil, err
	}
	mode := defaultMode
	if fsGroupOf(pod) != nil {
		mode = tokenModeWithFSGroup
	}
	files := map[string]fileProjection{}
	if p.CredentialBundlePath != "" {
		files[p.CredentialBundlePath] = fileProjection{Data: append(append([]byte{}, key...), chain...), Mode: mode}
	}
	if p.KeyPath != "" {
		files[p.KeyPath] = fileProjection{Data: key, Mode: mode}
	}
	if p.CertificateChainPath != "" {
		files[p.CertificateChainPath] = fileProjection{Data: chain, Mode: mode}
	}
	return files, nil
}

// collectTrustBundle returns the file of a clusterTrustBundle projection:
// the trust anchors of the named bundle or of the signer's selected bundles
// (upstream's projected volume plugin), mode 0600 when the pod has an
// fsGroup.
func (m *Manager) collectTrustBundle(ctx context.Context, pod *v1.Pod, p *v1.ClusterTrustBundleProjection, defaultMode int32) (map[string]fileProjection, error) {
	if m.bundles == nil {
		return nil, errors.New("clusterTrustBundle projections need the API server (a standalone kubelet has none)")
	}
	allowMissing := isOptional(p.Optional)
	var data []byte
	var err error
	switch {
	case p.Name != nil:
		data, err = m.bundles.TrustAnchorsByName(ctx, *p.Name, allowMissing)
	case p.SignerName != nil:
		data, err = m.bundles.TrustAnchorsBySigner(ctx, *p.SignerName, p.LabelSelector, allowMissing)
	default:
		err = errors.New("ClusterTrustBundle projection requires either name or signerName to be set")
	}
	if err != nil {
		return nil, err
	}
	mode := defaultMode
	if fsGroupOf(pod) != nil {
		mode = tokenModeWithFSGroup
	}
	return map[string]fileProjection{p.Path: {Data: data, Mode: mode}}, nil
}

// collectToken returns the token file of a serviceAccountToken projection: a token
// of the pod's service account bound to the pod (TokenRequest with boundObjectRef
// Pod name+uid), from the token cache.
func (m *Manager) collectToken(ctx context.Context, pod *v1.Pod, tp *v1.ServiceAccountTokenProjection, defaultMode int32) (map[string]fileProjection, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = pod.Spec.DeprecatedServiceAccount //nolint:staticcheck // older pods set only this field
	}
	if sa == "" {
		return nil, fmt.Errorf("serviceAccountToken %q: the pod has no service account", tp.Path)
	}
	mode := defaultMode
	if fsGroupOf(pod) != nil {
		mode = tokenModeWithFSGroup
	}
	tr, err := m.tokens.get(ctx, pod.Namespace, sa, tokenRequestFor(pod, tp))
	if err != nil {
		return nil, fmt.Errorf("get service account token for %s/%s: %w", pod.Namespace, sa, err)
	}
	return map[string]fileProjection{tp.Path: {Data: []byte(tr.Status.Token), Mode: mode}}, nil
}

// tokenRequestFor builds the TokenRequest of a projection for pod.
func tokenRequestFor(pod *v1.Pod, tp *v1.ServiceAccountTokenProjection) *authenticationv1.TokenRequest {
	exp := defaultTokenExpirationSeconds
	if tp.ExpirationSeconds != nil {
		exp = *tp.ExpirationSeconds
	}
	var auds []string
	if tp.Audience != "" {
		auds = []string{tp.Audience}
	}
	return &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences:         auds,
		ExpirationSeconds: &exp,
		BoundObjectRef: &authenticationv1.BoundObjectReference{
			APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
		},
	}}
}
