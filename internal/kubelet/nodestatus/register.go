package nodestatus

import (
	"context"
	"fmt"
	goruntime "runtime"
	"time"

	"github.com/kubelet-dockershim/kubelet/internal/kubelet/nodepatch"
	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label and annotation keys the kubelet sets on its Node.
const (
	// taintExternalCloudProvider marks a node an external cloud controller
	// manager has not initialized yet; annotationProvidedNodeIP hands it the
	// --node-ip (k8s.io/cloud-provider's names).
	taintExternalCloudProvider = "node.cloudprovider.kubernetes.io/uninitialized"
	annotationProvidedNodeIP   = "alpha.kubernetes.io/provided-node-ip"
	labelOSBeta                = "beta.kubernetes.io/os"
	labelArchBeta              = "beta.kubernetes.io/arch"
	// annotationControllerManagedAttach tells the attach/detach controller that it,
	// not the kubelet, attaches volumes to this node (enableControllerAttachDetach,
	// true by default).
	annotationControllerManagedAttach = "volumes.kubernetes.io/controller-managed-attach-detach"
)

// defaultLabels returns the labels the kubelet owns and reconciles on an existing node.
func defaultLabels() []string {
	return []string{
		v1.LabelHostname,
		v1.LabelTopologyZone,
		v1.LabelTopologyRegion,
		v1.LabelFailureDomainBetaZone,
		v1.LabelFailureDomainBetaRegion,
		v1.LabelInstanceTypeStable,
		v1.LabelInstanceType,
		v1.LabelOSStable,
		v1.LabelArchStable,
		v1.LabelWindowsBuild,
		labelOSBeta,
		labelArchBeta,
	}
}

// registerWithAPIServer creates (or adopts) the Node, retrying with a backoff of
// 100ms doubling up to 7s, as upstream. It returns false when ctx ended first.
func (c *Controller) registerWithAPIServer(ctx context.Context) bool {
	step := 100 * time.Millisecond
	for {
		node := c.initialNode(ctx)
		c.startup.attemptRegister()
		c.log.Info("Attempting to register node", zap.String("node", node.Name))
		if err := c.tryRegister(ctx, node); err == nil {
			c.log.Info("Successfully registered node", zap.String("node", node.Name))
			return true
		} else if ctx.Err() == nil {
			c.log.Error("Unable to register node with API server", zap.String("node", node.Name),
				zap.Duration("retry-in", step), zap.Error(err))
		}
		t := c.clock.NewTimer(step)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C():
		}
		step = min(2*step, registerBackoffMax)
	}
}

// initialNode builds the Node this kubelet registers: default labels with
// Options.Labels over them, the registration taints, the attach/detach
// annotation and a full status.
func (c *Controller) initialNode(ctx context.Context) *v1.Node {
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.opts.NodeName,
			Labels: map[string]string{
				v1.LabelHostname:   c.opts.Hostname,
				v1.LabelOSStable:   goruntime.GOOS,
				v1.LabelArchStable: goruntime.GOARCH,
				labelOSBeta:        goruntime.GOOS,
				labelArchBeta:      goruntime.GOARCH,
			},
			Annotations: map[string]string{},
		},
		Spec: v1.NodeSpec{ProviderID: c.opts.ProviderID},
	}
	if !c.opts.NoControllerAttachDetach {
		node.Annotations[annotationControllerManagedAttach] = "true"
	}
	node.Spec.Taints = append(node.Spec.Taints, c.opts.Taints...)
	if c.opts.ExternalCloudProvider {
		node.Spec.Taints = append(node.Spec.Taints, v1.Taint{Key: taintExternalCloudProvider, Value: "true", Effect: v1.TaintEffectNoSchedule})
	}
	for k, v := range c.opts.Labels {
		if old, ok := node.Labels[k]; ok && old != v {
			c.log.Info("The node label overwrites a default", zap.String("label", k),
				zap.String("value", v), zap.String("default", old))
		}
		node.Labels[k] = v
	}
	c.setNodeStatus(ctx, node)
	return node
}

// tryRegister creates node; when it exists already (or creating is forbidden but
// the node may exist) it GETs the existing node and reconciles what the kubelet
// owns: the attach/detach annotation, the default labels and an empty capacity.
// Taints and other labels are left alone (NodeRestriction forbids a node to
// change its taints).
func (c *Controller) tryRegister(ctx context.Context, node *v1.Node) error {
	nodes := c.opts.Client.CoreV1().Nodes()
	if c.opts.DoNotRegister {
		// --register-node=false: someone else creates the Node; the kubelet
		// waits for it and then keeps its status and Lease.
		existing, err := nodes.Get(ctx, c.opts.NodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("node not created yet (--register-node=false): %w", err)
		}
		c.known.markRegistered(existing)
		return nil
	}
	created, err := nodes.Create(ctx, node, metav1.CreateOptions{})
	if err == nil {
		c.startup.registeredNewNode()
		c.known.markRegistered(created)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) && !apierrors.IsForbidden(err) {
		return fmt.Errorf("create node: %w", err)
	}
	existing, getErr := nodes.Get(ctx, c.opts.NodeName, metav1.GetOptions{})
	if getErr != nil {
		return fmt.Errorf("create node: %w; get existing node: %w", err, getErr)
	}
	c.log.Info("Node was previously registered", zap.String("node", existing.Name))
	original := existing.DeepCopy()
	update := reconcileAttachAnnotation(node, existing)
	update = reconcileDefaultLabels(node, existing) || update
	update = reconcileResources(node, existing) || update
	if update {
		if existing, err = nodepatch.Status(ctx, nodes, original, existing); err != nil {
			return fmt.Errorf("reconcile existing node: %w", err)
		}
	}
	c.known.markRegistered(existing)
	return nil
}

// reconcileAttachAnnotation copies the attach/detach annotation of the initial
// node onto the existing one; true when it changed.
func reconcileAttachAnnotation(initial, existing *v1.Node) bool {
	want, set := initial.Annotations[annotationControllerManagedAttach]
	if existing.Annotations[annotationControllerManagedAttach] == want {
		return false
	}
	if !set {
		delete(existing.Annotations, annotationControllerManagedAttach)
		return true
	}
	if existing.Annotations == nil {
		existing.Annotations = map[string]string{}
	}
	existing.Annotations[annotationControllerManagedAttach] = want
	return true
}

// reconcileDefaultLabels sets the kubelet-owned labels of the existing node to
// the initial node's values (dropping empty ones); true when one changed.
func reconcileDefaultLabels(initial, existing *v1.Node) bool {
	changed := false
	if existing.Labels == nil {
		existing.Labels = map[string]string{}
	}
	for _, key := range defaultLabels() {
		want, ok := initial.Labels[key]
		if !ok {
			continue
		}
		if existing.Labels[key] != want {
			existing.Labels[key] = want
			changed = true
		}
		if existing.Labels[key] == "" {
			delete(existing.Labels, key)
		}
	}
	return changed
}

// reconcileResources fills a missing capacity/allocatable of the existing node
// from the initial node; true when something changed. Extended resources are
// kept: without a device manager nothing re-reports them, and a cluster admin may
// advertise them by patching the node status.
func reconcileResources(initial, existing *v1.Node) bool {
	changed := false
	if existing.Status.Capacity == nil && initial.Status.Capacity != nil {
		existing.Status.Capacity = initial.Status.Capacity.DeepCopy()
		changed = true
	}
	if existing.Status.Allocatable == nil && initial.Status.Allocatable != nil {
		existing.Status.Allocatable = initial.Status.Allocatable.DeepCopy()
		changed = true
	}
	return changed
}

// ensureOSArchLabels puts back the kubernetes.io/os and kubernetes.io/arch
// labels when missing or wrong; true when it changed the node.
func ensureOSArchLabels(node *v1.Node) bool {
	changed := false
	for key, want := range map[string]string{v1.LabelOSStable: goruntime.GOOS, v1.LabelArchStable: goruntime.GOARCH} {
		if node.Labels[key] == want {
			continue
		}
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[key] = want
		changed = true
	}
	return changed
}
