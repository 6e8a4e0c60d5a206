package volumes

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// fakeObjects is an in-memory APIObjects. Tokens are "token-<n>" and expire
// ExpirationSeconds after the clock's now. err, when set, fails every call.
type fakeObjects struct {
	clock clock.PassiveClock

	mu         sync.Mutex
	configMaps map[string]*v1.ConfigMap // "namespace/name"
	secrets    map[string]*v1.Secret
	err        error
	requests   []*authenticationv1.TokenRequest
	tokenSAs   []string // "namespace/sa" per request
}

func newFakeObjects(clk clock.PassiveClock) *fakeObjects {
	return &fakeObjects{clock: clk, configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{}}
}

func (f *fakeObjects) addConfigMap(namespace, name string, data map[string]string, binary map[string][]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.configMaps[namespace+"/"+name] = &v1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Data:       data, BinaryData: binary,
	}
}

func (f *fakeObjects) addSecret(namespace, name string, data map[string][]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.secrets[namespace+"/"+name] = &v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Data: data}
}

func (f *fakeObjects) deleteConfigMap(namespace, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.configMaps, namespace+"/"+name)
}

func (f *fakeObjects) setErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeObjects) tokenRequests() []*authenticationv1.TokenRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*authenticationv1.TokenRequest(nil), f.requests...)
}

func (f *fakeObjects) GetConfigMap(_ context.Context, namespace, name string) (*v1.ConfigMap, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	cm, ok := f.configMaps[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	return cm.DeepCopy(), nil
}

func (f *fakeObjects) GetSecret(_ context.Context, namespace, name string) (*v1.Secret, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	s, ok := f.secrets[namespace+"/"+name]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	return s.DeepCopy(), nil
}

func (f *fakeObjects) CreateToken(_ context.Context, namespace, sa string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.requests = append(f.requests, req.DeepCopy())
	f.tokenSAs = append(f.tokenSAs, namespace+"/"+sa)
	out := req.DeepCopy()
	exp := time.Duration(*req.Spec.ExpirationSeconds) * time.Second
	out.Status = authenticationv1.TokenRequestStatus{
		Token:               fmt.Sprintf("token-%d", len(f.requests)),
		ExpirationTimestamp: metav1.NewTime(f.clock.Now().Add(exp)),
	}
	return out, nil
}
