package apiobjects

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// objectManager is upstream's secret or configMap manager: the pods
// register the objects of their kind they reference, and reads of those go
// through the strategy's store (Watch, Cache); with the Get strategy (no
// store) every read goes to the API server.
type objectManager struct {
	store  objectStore // nil: Get
	names  func(*v1.Pod) sets.Set[string]
	fetch  getFunc
	logger *zap.Logger

	mu   sync.Mutex
	pods map[k8stypes.UID]podRefs // registered, as last registered
}

// podRefs are the names a registered pod references, in its namespace.
type podRefs struct {
	namespace string
	names     sets.Set[string]
}

func newObjectManager(store objectStore, names func(*v1.Pod) sets.Set[string], fetch getFunc, logger *zap.Logger) *objectManager {
	return &objectManager{store: store, names: names, fetch: fetch, logger: logger, pods: map[k8stypes.UID]podRefs{}}
}

// register records pod's references: new ones are added, those its last
// version had and this one lacks are dropped (upstream's RegisterPod). The
// kubelet registers a pod at each sync: the last version's names are kept,
// not worked out again.
func (m *objectManager) register(pod *v1.Pod) {
	if m.store == nil {
		return
	}
	names := m.names(pod)
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.pods[pod.UID]
	m.pods[pod.UID] = podRefs{namespace: pod.Namespace, names: names}
	for name := range names {
		if !prev.names.Has(name) {
			m.store.addReference(pod.Namespace, name)
		}
	}
	for name := range prev.names {
		if !names.Has(name) {
			m.store.deleteReference(prev.namespace, name)
		}
	}
}

// unregister drops pod's references (upstream's UnregisterPod).
func (m *objectManager) unregister(pod *v1.Pod) {
	if m.store == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.pods[pod.UID]
	delete(m.pods, pod.UID)
	for name := range prev.names {
		m.store.deleteReference(prev.namespace, name)
	}
}

// get reads namespace/name through the store. An object no registered pod
// references (upstream's kubelet answers `object "ns"/"name" not
// registered`) is read from the API server: the CSI secrets of a
// PersistentVolume, which upstream's CSI plugin reads so, are such objects.
func (m *objectManager) get(ctx context.Context, namespace, name string) (runtime.Object, error) {
	if m.store != nil {
		obj, err := m.store.get(ctx, namespace, name)
		if !errors.Is(err, errNotRegistered) {
			return obj, err
		}
		m.logger.Debug("object no pod references, read from the API server", zap.String("object", namespace+"/"+name))
	}
	return m.fetch(ctx, namespace, name, metav1.GetOptions{})
}
