// Package nodepatch writes the kubelet's changes to its Node object as a
// strategic merge patch of the status subresource, as upstream's
// PatchNodeStatus does: only what changed is sent, so a field another writer
// changed meanwhile (the taints the node lifecycle controller sets) is never
// sent back stale, which the NodeRestriction admission plugin would refuse.
package nodepatch

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Status sends the difference between old and updated (metadata and
// status; spec changes are dropped) as a strategic merge patch of the node's
// status subresource and returns the node the API server answered with.
func Status(ctx context.Context, nodes corev1client.NodeInterface, old, updated *v1.Node) (*v1.Node, error) {
	patch, err := statusPatch(old, updated)
	if err != nil {
		return nil, fmt.Errorf("node %q: %w", old.Name, err)
	}
	node, err := nodes.Patch(ctx, old.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return nil, fmt.Errorf("patch status of node %q: %w", old.Name, err)
	}
	return node, nil
}

// statusPatch builds the two-way strategic merge patch from old to updated.
// status.addresses is declared patchStrategy=merge on type, which would merge
// old and new addresses: when they changed, the patch replaces the whole list
// instead (as upstream's PatchNodeStatus does).
func statusPatch(old, updated *v1.Node) ([]byte, error) {
	oldJSON, err := json.Marshal(old)
	if err != nil {
		return nil, fmt.Errorf("marshal old node: %w", err)
	}
	replaceAddresses := len(old.Status.Addresses) > 0 &&
		!equality.Semantic.DeepEqual(old.Status.Addresses, updated.Status.Addresses)
	diff := updated.DeepCopy()
	diff.Spec = old.Spec
	if replaceAddresses {
		diff.Status.Addresses = old.Status.Addresses
	}
	newJSON, err := json.Marshal(diff)
	if err != nil {
		return nil, fmt.Errorf("marshal new node: %w", err)
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, v1.Node{})
	if err != nil {
		return nil, fmt.Errorf("create status patch: %w", err)
	}
	if replaceAddresses {
		if patch, err = withReplacedAddresses(patch, updated.Status.Addresses); err != nil {
			return nil, fmt.Errorf("replace addresses in status patch: %w", err)
		}
	}
	return patch, nil
}

// withReplacedAddresses sets status.addresses in patch to addresses followed by
// the {"$patch":"replace"} directive.
func withReplacedAddresses(patch []byte, addresses []v1.NodeAddress) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		return nil, err
	}
	list := make([]any, 0, len(addresses)+1)
	for _, a := range addresses {
		list = append(list, map[string]any{"type": string(a.Type), "address": a.Address})
	}
	list = append(list, map[string]any{"$patch": "replace"})
	status, _ := m["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		m["status"] = status
	}
	status["addresses"] = list
	return json.Marshal(m)
}
