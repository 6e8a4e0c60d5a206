package status

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	kubecontainer "github.com/kubelet-dockershim/kubelet/internal/kubelet/container"
)

// MirrorClient creates and deletes mirror pods: the API server's read-only
// copies of the kubelet's static pods (upstream pkg/kubelet/pod/mirror_client.go).
// The client must act as the node (system:node:<name>): NodeRestriction only
// lets a node create mirror pods bound to itself and owned by its Node object.
type MirrorClient struct {
	client   kubernetes.Interface
	nodeName string
}

// NewMirrorClient returns a MirrorClient for nodeName.
func NewMirrorClient(client kubernetes.Interface, nodeName string) *MirrorClient {
	return &MirrorClient{client: client, nodeName: nodeName}
}

// CreateMirrorPod creates the mirror pod of static: a copy bound to this node
// with annotation kubernetes.io/config.mirror set to the static pod's
// kubernetes.io/config.hash and a controller ownerReference to the Node (whose
// UID is read from the API: the Node must exist). An existing mirror pod of the
// same static pod counts as success.
func (c *MirrorClient) CreateMirrorPod(ctx context.Context, static *v1.Pod) error {
	hash, ok := static.Annotations[kubecontainer.ConfigHashAnnotationKey]
	if !ok || hash == "" {
		return fmt.Errorf("create mirror pod of %s/%s: the static pod has no %s annotation",
			static.Namespace, static.Name, kubecontainer.ConfigHashAnnotationKey)
	}
	node, err := c.client.CoreV1().Nodes().Get(ctx, c.nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("create mirror pod of %s/%s: get node %q: %w", static.Namespace, static.Name, c.nodeName, err)
	}
	if node.UID == "" {
		return fmt.Errorf("create mirror pod of %s/%s: node %q has no UID", static.Namespace, static.Name, c.nodeName)
	}
	mirror := mirrorOf(static, hash, node)
	_, err = c.client.CoreV1().Pods(mirror.Namespace).Create(ctx, mirror, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := c.client.CoreV1().Pods(mirror.Namespace).Get(ctx, mirror.Name, metav1.GetOptions{})
		if getErr == nil && MirrorMatchesStatic(existing, static) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("create mirror pod %s/%s: %w", mirror.Namespace, mirror.Name, err)
	}
	return nil
}

// mirrorOf returns the mirror pod object for static.
func mirrorOf(static *v1.Pod, hash string, node *v1.Node) *v1.Pod {
	controller := true
	mirror := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        static.Name,
			Namespace:   static.Namespace,
			Labels:      static.Labels,
			Annotations: make(map[string]string, len(static.Annotations)+1),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Node",
				Name:       node.Name,
				UID:        node.UID,
				Controller: &controller,
			}},
		},
		Spec: *static.Spec.DeepCopy(),
	}
	for k, v := range static.Annotations {
		mirror.Annotations[k] = v
	}
	mirror.Annotations[kubecontainer.ConfigMirrorAnnotationKey] = hash
	if mirror.Spec.NodeName == "" {
		mirror.Spec.NodeName = node.Name
	}
	return mirror
}

// DeleteMirrorPod deletes the mirror pod namespace/name at once (grace period
// 0), only if its UID is *uid when uid is given. It reports true when no such
// mirror pod is left in the API (deleted now, already gone, or replaced by a
// pod with another UID); an error otherwise.
func (c *MirrorClient) DeleteMirrorPod(ctx context.Context, namespace, name string, uid *k8stypes.UID) (bool, error) {
	grace := int64(0)
	opts := metav1.DeleteOptions{GracePeriodSeconds: &grace}
	if uid != nil {
		opts.Preconditions = &metav1.Preconditions{UID: uid}
	}
	err := c.client.CoreV1().Pods(namespace).Delete(ctx, name, opts)
	if err == nil || apierrors.IsNotFound(err) || (uid != nil && apierrors.IsConflict(err)) {
		return true, nil
	}
	return false, fmt.Errorf("delete mirror pod %s/%s: %w", namespace, name, err)
}

// IsMirrorPod reports whether p is a mirror pod (it carries the
// kubernetes.io/config.mirror annotation).
func IsMirrorPod(p *v1.Pod) bool {
	if p == nil {
		return false
	}
	_, ok := p.Annotations[kubecontainer.ConfigMirrorAnnotationKey]
	return ok
}

// MirrorMatchesStatic reports whether mirror is the mirror pod of static: same
// namespace and name, and its kubernetes.io/config.mirror annotation equals
// the static pod's kubernetes.io/config.hash.
func MirrorMatchesStatic(mirror, static *v1.Pod) bool {
	if mirror == nil || static == nil || mirror.Name != static.Name || mirror.Namespace != static.Namespace {
		return false
	}
	got, ok := mirror.Annotations[kubecontainer.ConfigMirrorAnnotationKey]
	want := static.Annotations[kubecontainer.ConfigHashAnnotationKey]
	return ok && want != "" && got == want
}
