package podcerts

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons of the warnings about a pod's certificates (upstream's).
const (
	eventOverdue = "CertificateOverdueForRefresh"
	eventExpired = "CertificateExpired"
)

// advance takes one step of the projection src of pod from st: make the first
// request, take a pending request's outcome, or request a successor once the
// certificate is due for refresh. The returned state is stored even with an
// error (the error only has the projection retried with backoff).
func (m *Manager) advance(ctx context.Context, pod *v1.Pod, src *v1.PodCertificateProjection, st state) (state, error) {
	switch st.phase {
	case phaseInitial:
		req, err := m.request(ctx, pod, src)
		if err != nil {
			return st, fmt.Errorf("while creating initial PodCertificateRequest: %w", err)
		}
		st.phase, st.request = phaseWaiting, req
		return st, nil
	case phaseWaiting, phaseRefreshing:
		return m.outcome(pod, st)
	case phaseFresh:
		now := m.clock.Now()
		if now.Before(st.current.beginRefreshAt) {
			return st, nil
		}
		st.current = m.warn(pod, st.current, now)
		req, err := m.request(ctx, pod, src)
		if err != nil {
			return st, fmt.Errorf("while creating refresh PodCertificateRequest: %w", err)
		}
		st.phase, st.request = phaseRefreshing, req
		return st, nil
	}
	return st, nil // denied and failed are final
}

// outcome looks at the pending request of st in the informer: issued gives
// the new credential, denied or failed the final phase (with a warning on the
// pod); a request missing past its abandon time counts as deleted, and the
// projection asks again.
func (m *Manager) outcome(pod *v1.Pod, st state) (state, error) {
	name := pod.Namespace + "/" + st.request.name
	pcr, err := m.lister.PodCertificateRequests(pod.Namespace).Get(st.request.name)
	if apierrors.IsNotFound(err) && m.clock.Now().After(st.request.abandonAt) {
		if st.phase == phaseWaiting {
			st.phase = phaseInitial
		} else {
			st.phase = phaseFresh
		}
		st.request = pending{}
		return st, fmt.Errorf("PodCertificateRequest %q appears to have been deleted", name)
	}
	if err != nil {
		return st, fmt.Errorf("while getting PodCertificateRequest %q: %w", name, err)
	}
	for _, c := range pcr.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeDenied:
			m.event(pod, certificatesv1.PodCertificateRequestConditionTypeDenied,
				fmt.Sprintf("PodCertificateRequest %s was denied, reason=%q, message=%q", name, c.Reason, c.Message))
			return state{phase: phaseDenied, reason: c.Reason, message: c.Message}, nil
		case certificatesv1.PodCertificateRequestConditionTypeFailed:
			m.event(pod, certificatesv1.PodCertificateRequestConditionTypeFailed,
				fmt.Sprintf("PodCertificateRequest %s failed, reason=%q, message=%q", name, c.Reason, c.Message))
			return state{phase: phaseFailed, reason: c.Reason, message: c.Message}, nil
		case certificatesv1.PodCertificateRequestConditionTypeIssued:
			if pcr.Status.BeginRefreshAt == nil || pcr.Status.NotAfter == nil {
				return st, fmt.Errorf("PodCertificateRequest %q is issued without beginRefreshAt or notAfter", name)
			}
			return state{phase: phaseFresh, current: credential{
				key: st.request.key, chain: cleanChain([]byte(pcr.Status.CertificateChain)),
				beginRefreshAt: pcr.Status.BeginRefreshAt.Add(jitter()), notAfter: pcr.Status.NotAfter.Time,
			}}, nil
		}
	}
	if st.phase == phaseRefreshing {
		st.current = m.warn(pod, st.current, m.clock.Now())
	}
	return st, nil // still pending: its next update queues the projection
}

// warn emits, once per credential, the warnings for a certificate overdue for
// refresh and for an expired one.
func (m *Manager) warn(pod *v1.Pod, c credential, now time.Time) credential {
	if !c.warnedOverdue && now.After(c.beginRefreshAt.Add(overdueAfter)) {
		m.event(pod, eventOverdue, "PodCertificate refresh overdue")
		c.warnedOverdue = true
	}
	if !c.warnedExpired && now.After(c.notAfter) {
		m.event(pod, eventExpired, "PodCertificate expired")
		c.warnedExpired = true
	}
	return c
}

// event records a warning about pod.
func (m *Manager) event(pod *v1.Pod, reason, message string) {
	if m.recorder != nil {
		m.recorder.Event(pod, v1.EventTypeWarning, reason, message)
	}
}

// request generates a key and creates a PodCertificateRequest for it, owned
// by the pod and naming the pod, its service account and this node with their
// UIDs (the API server's node restriction checks them all).
func (m *Manager) request(ctx context.Context, pod *v1.Pod, src *v1.PodCertificateProjection) (pending, error) {
	sa, err := m.client.CoreV1().ServiceAccounts(pod.Namespace).Get(ctx, pod.Spec.ServiceAccountName, metav1.GetOptions{})
	if err != nil {
		return pending{}, fmt.Errorf("while fetching service account: %w", err)
	}
	node, ok := m.node()
	if !ok || node.Name != m.nodeName || node.UID == "" {
		return pending{}, fmt.Errorf("the Node object %q is not known yet", m.nodeName)
	}
	keyPEM, csr, err := newKey(src.KeyType)
	if err != nil {
		return pending{}, fmt.Errorf("while generating keypair: %w", err)
	}
	pcr := &certificatesv1.PodCertificateRequest{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, GenerateName: "req-",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Spec: certificatesv1.PodCertificateRequestSpec{
			SignerName: src.SignerName,
			PodName:    pod.Name, PodUID: pod.UID,
			ServiceAccountName: pod.Spec.ServiceAccountName, ServiceAccountUID: sa.UID,
			NodeName: types.NodeName(m.nodeName), NodeUID: node.UID,
			MaxExpirationSeconds:      src.MaxExpirationSeconds,
			StubPKCS10Request:         csr,
			UnverifiedUserAnnotations: src.UserAnnotations,
		},
	}
	created, err := m.client.CertificatesV1().PodCertificateRequests(pod.Namespace).Create(ctx, pcr, metav1.CreateOptions{})
	if err != nil {
		return pending{}, fmt.Errorf("while creating on API: %w", err)
	}
	m.logger.Debug("PodCertificateRequest created", zap.String("pcr", created.Namespace+"/"+created.Name),
		zap.String("pod", pod.Namespace+"/"+pod.Name), zap.String("signer", src.SignerName))
	return pending{name: created.Name, key: keyPEM, abandonAt: created.CreationTimestamp.Add(abandonAfter + jitter())}, nil
}
