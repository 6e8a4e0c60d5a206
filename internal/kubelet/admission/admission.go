// Package admission decides whether the kubelet admits a pod, with the
// checks and the reasons and messages of upstream's predicate admit handler:
// the pod's operating system (its kubernetes.io/os label and spec.os), the
// node's pod capacity, node name, node selector and required node affinity,
// host ports, and requests that fit the node's allocatable. (The node
// features a pod needs are internal/kubelet/nodefeatures'.)
//
// It is pure logic over its arguments (no I/O); the kubelet root calls it.
package admission

import (
	"fmt"
	"runtime"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// ReasonNodeAffinity is the rejection reason of a pod whose node selector or
// required node affinity the node does not match.
const ReasonNodeAffinity = predicateNodeAffinity

// Admission failure reasons and descriptions (upstream lifecycle predicates).
const (
	predicateNodeAffinity     = "NodeAffinity"
	predicateNodeAffinityDesc = "node(s) didn't match Pod's node affinity/selector"
	predicateNodePorts        = "NodePorts"
	predicateNodePortsDesc    = "node(s) didn't have free ports for the requested pod ports"
	predicateNodeName         = "NodeName"
	predicateNodeNameDesc     = "node(s) didn't match the requested node name"
)

// ReasonOutOfPods is the rejection reason when the node is full.
const ReasonOutOfPods = "OutOfpods"

// Rejections of a pod meant for another operating system (upstream values).
const (
	ReasonOSLabelMismatch  = "PodOSSelectorNodeLabelDoesNotMatch"
	messageOSLabelMismatch = "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"
	ReasonOSNotSupported   = "PodOSNotSupported"
	messageOSNotSupported  = "Failed to admit pod as the OS field doesn't match node OS"
)

// Target is what a pod is admitted against.
type Target struct {
	// Node is the API node object; nil (standalone, or not registered yet):
	// the node name, selector and affinity are not checked.
	Node *v1.Node
	// Allocatable is the node's allocatable the requests must fit (the node
	// object's when there is one, else the kubelet's own); nil: not checked.
	Allocatable v1.ResourceList
	// MaxPods is the node's pod capacity; 0: not checked.
	MaxPods int
}

// Admit runs upstream's predicate admit checks of pod against the target and
// the other active admitted pods, in upstream's order. It returns the reason
// and message of the first failure.
func Admit(pod *v1.Pod, t Target, others []*v1.Pod) (reason, message string, ok bool) {
	if reason, message, ok := admitOS(pod, runtime.GOOS); !ok {
		return reason, message, false
	}
	if t.MaxPods > 0 && len(others)+1 > t.MaxPods {
		return ReasonOutOfPods, fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d",
			len(others), t.MaxPods), false
	}
	predicateFailed := func(name, desc string) (string, string, bool) {
		return name, fmt.Sprintf("Predicate %s failed: %s", name, desc), false
	}
	if t.Node != nil {
		if pod.Spec.NodeName != "" && pod.Spec.NodeName != t.Node.Name {
			return predicateFailed(predicateNodeName, predicateNodeNameDesc)
		}
		if match, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(t.Node); !match {
			return predicateFailed(predicateNodeAffinity, predicateNodeAffinityDesc)
		}
	}
	if portsConflict(pod, others) {
		return predicateFailed(predicateNodePorts, predicateNodePortsDesc)
	}
	if r, m, fits := resourcesFit(pod, t.Allocatable, others); !fits {
		return r, m, false
	}
	return "", "", true
}

// admitOS rejects a pod meant for another operating system than nodeOS,
// first by its kubernetes.io/os label, then by its spec.os. As upstream, the
// node's OS is the one the kubelet runs on, whatever the node's label says
// (the node status sync corrects the label), and the label checked is the
// pod's own label, not its node selector.
func admitOS(pod *v1.Pod, nodeOS string) (reason, message string, ok bool) {
	if labelOS, labelled := pod.Labels[v1.LabelOSStable]; labelled && labelOS != nodeOS {
		return ReasonOSLabelMismatch, messageOSLabelMismatch, false
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != nodeOS {
		return ReasonOSNotSupported, messageOSNotSupported, false
	}
	return "", "", true
}

// hostPort is one host port a pod binds.
type hostPort struct {
	ip       string
	protocol v1.Protocol
	port     int32
}

func podHostPorts(p *v1.Pod) []hostPort {
	var out []hostPort
	add := func(cs []v1.Container) {
		for _, c := range cs {
			for _, cp := range c.Ports {
				if cp.HostPort <= 0 {
					continue
				}
				proto := cp.Protocol
				if proto == "" {
					proto = v1.ProtocolTCP
				}
				ip := cp.HostIP
				if ip == "" {
					ip = "0.0.0.0"
				}
				out = append(out, hostPort{ip: ip, protocol: proto, port: cp.HostPort})
			}
		}
	}
	add(p.Spec.InitContainers)
	add(p.Spec.Containers)
	return out
}

// portsConflict reports whether pod wants a host port (same protocol and port,
// same IP or either one the wildcard) another pod holds.
func portsConflict(pod *v1.Pod, others []*v1.Pod) bool {
	want := podHostPorts(pod)
	if len(want) == 0 {
		return false
	}
	for _, o := range others {
		for _, held := range podHostPorts(o) {
			for _, w := range want {
				if w.port == held.port && w.protocol == held.protocol &&
					(w.ip == held.ip || w.ip == "0.0.0.0" || held.ip == "0.0.0.0") {
					return true
				}
			}
		}
	}
	return false
}

// resourcesFit checks the pod's effective requests plus those of others
// against allocatable, for every resource the pod requests that allocatable
// lists. The message has upstream's InsufficientResourceError shape.
func resourcesFit(pod *v1.Pod, allocatable v1.ResourceList, others []*v1.Pod) (reason, message string, ok bool) {
	want := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	used := v1.ResourceList{}
	for _, o := range others {
		for name, q := range resourcehelper.PodRequests(o, resourcehelper.PodResourcesOptions{}) {
			sum := used[name]
			sum.Add(q)
			used[name] = sum
		}
	}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage} {
		req, ok := want[name]
		if !ok || req.IsZero() {
			continue
		}
		capacity, ok := allocatable[name]
		if !ok {
			continue
		}
		u := used[name]
		total := u.DeepCopy()
		total.Add(req)
		if total.Cmp(capacity) > 0 {
			return "OutOf" + string(name), fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
				name, amount(name, req), amount(name, u), amount(name, capacity)), false
		}
	}
	return "", "", true
}

// amount is a quantity as upstream prints it: millicores for cpu, units else.
func amount(name v1.ResourceName, q resource.Quantity) int64 {
	if name == v1.ResourceCPU {
		return q.MilliValue()
	}
	return q.Value()
}
