// Package nodefeatures decides which node features this kubelet declares in
// its Node's status.declaredFeatures (upstream's NodeDeclaredFeatures, GA in
// 1.37), and checks pods against them.
//
// The features are those of upstream's registry
// (k8s.io/component-helpers/nodedeclaredfeatures) that its discovery finds
// on for this kubelet's feature gates and version, and that this kubelet
// carries out (implemented); the list is sorted, as the API requires. The
// cluster acts on it: the scheduler keeps a pod that needs an undeclared
// feature off the node, and the API server's NodeDeclaredFeatureValidator
// refuses an update of a bound pod (a resize) that needs one. The kubelet
// does as upstream's: it rejects at admission a pod that needs a feature the
// node does not declare (PodFeatureUnsupported), and warns of a pod update
// that does (FailedNodeDeclaredFeaturesCheck).
//
// It imports no package of this module.
package nodefeatures

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	ndf "k8s.io/component-helpers/nodedeclaredfeatures"
)

// ReasonUnsupported is upstream's rejection reason for a pod that needs a
// feature the node does not declare.
const ReasonUnsupported = "PodFeatureUnsupported"

// implemented are the features of upstream's registry this kubelet carries
// out when their gate is on: resizing the pod-level resources and non-sidecar
// init containers in place, serving exec, attach and port-forward WebSockets
// itself (the API server then proxies them instead of translating them), and
// restart rules with the RestartAllContainers action (the pod's containers
// all restart in place). The others are never declared, whatever the gates
// say: memory-backed volume resize, user namespaces on the host network, DRA
// node operations and volume bind mount options are not implemented here.
var implemented = map[string]bool{
	"InPlacePodLevelResourcesVerticalScaling": true,
	"InPlacePodVerticalScalingInitContainers": true,
	"ExtendWebSocketsToKubelet":               true,
	"RestartAllContainersOnContainerExits":    true,
}

// Declared is the node's declared features.
type Declared struct {
	framework *ndf.Framework
	names     []string
	set       ndf.FeatureSet
	version   *version.Version
}

// Discover returns the features the node declares: upstream's discovery with
// enabled (the kubelet's feature gates) and kubeletVersion (e.g. "v1.37.1"),
// kept to the implemented ones.
func Discover(enabled func(gate string) bool, kubeletVersion string) (*Declared, error) {
	v, err := version.ParseGeneric(kubeletVersion)
	if err != nil {
		return nil, fmt.Errorf("node declared features: kubelet version %q: %w", kubeletVersion, err)
	}
	f := ndf.DefaultFramework
	found := f.DiscoverNodeFeatures(&ndf.NodeConfiguration{FeatureGates: gates(enabled), Version: v})
	names := slices.DeleteFunc(found, func(name string) bool { return !implemented[name] })
	set, err := f.MapSorted(names)
	if err != nil {
		return nil, fmt.Errorf("node declared features %v: %w", names, err)
	}
	return &Declared{framework: f, names: names, set: set, version: v}, nil
}

// gates adapts a gate lookup to the discovery's feature gates.
type gates func(string) bool

func (g gates) Enabled(name string) bool { return g(name) }

// Names are the declared features, sorted (node.status.declaredFeatures);
// empty, not nil, when there are none.
func (d *Declared) Names() []string {
	return append([]string{}, d.names...)
}

// Admit rejects, with upstream's reason and message, a pod that needs to
// run on a node declaring a feature this one does not.
func (d *Declared) Admit(pod *v1.Pod) (reason, message string, ok bool) {
	reqs, err := d.framework.InferForPodScheduling(&ndf.PodInfo{Spec: &pod.Spec, Status: &pod.Status}, d.version)
	if err != nil {
		return ReasonUnsupported, fmt.Sprintf("Failed to infer pod's feature requirements: %v", err), false
	}
	missing, err := d.missing(reqs)
	if err != nil {
		return ReasonUnsupported, fmt.Sprintf("Failed to match pod's feature requirements against the node: %v", err), false
	}
	if len(missing) > 0 {
		return ReasonUnsupported, "Pod requires node features that are not available: " + strings.Join(missing, ", "), false
	}
	return "", "", true
}

// MissingForUpdate lists the features the change from old to cur (a
// resize) needs that the node does not declare.
func (d *Declared) MissingForUpdate(old, cur *v1.Pod) ([]string, error) {
	reqs, err := d.framework.InferForPodUpdate(&ndf.PodInfo{Spec: &old.Spec, Status: &old.Status},
		&ndf.PodInfo{Spec: &cur.Spec, Status: &cur.Status}, d.version)
	if err != nil {
		return nil, fmt.Errorf("infer the features the update of pod %s/%s needs: %w", cur.Namespace, cur.Name, err)
	}
	return d.missing(reqs)
}

// missing lists the features of reqs the node does not declare.
func (d *Declared) missing(reqs ndf.FeatureSet) ([]string, error) {
	if reqs.IsEmpty() {
		return nil, nil
	}
	match, err := d.framework.MatchNodeFeatureSet(reqs, d.set)
	if err != nil {
		return nil, err
	}
	return match.UnsatisfiedRequirements, nil
}
