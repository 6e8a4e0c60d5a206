// Package nodestatus makes this kubelet a node of a cluster: it registers the
// Node object, keeps its status current and renews its Lease.
//
// Registration creates the Node with the default labels (kubernetes.io/hostname,
// kubernetes.io/os, kubernetes.io/arch and their beta twins) under the
// --node-labels, the --register-with-taints and a full status, retrying with a
// backoff (100ms doubling to 7s) until it succeeds. When the Node exists already
// its kubelet-owned labels and the attach/detach annotation are reconciled;
// taints are not touched.
//
// The status loop runs every StatusUpdateFrequency (jittered): it GETs the Node,
// recomputes addresses, capacity and allocatable, nodeInfo, daemon endpoints, the
// images (Options.Images), the MemoryPressure, DiskPressure and PIDPressure
// conditions (as the eviction manager reports them) and Ready, and sends
// a strategic merge patch of the status subresource when something other than a
// heartbeat time changed or StatusReportFrequency passed (5 tries per update).
// Until the node is first reported Ready it also polls Readiness every 100ms, so
// the node turns Ready as soon as the runtime is. Heartbeat times move on every
// report; transition times only when a condition's status flips.
//
// The Lease (kube-node-lease/<node>) is renewed by the upstream controller of
// k8s.io/component-helpers/apimachinery/lease every LeaseDuration/4, with an
// ownerReference to the Node.
//
// Only internal/app and the kubelet coordinator (internal/kubelet) may import
// this package; it imports no internal package. Its clientcert subpackage does
// TLS bootstrap and client certificate rotation.
//
// Usage:
//
//	ctl, err := nodestatus.New(nodestatus.Options{
//		Client:         client, // with the node's credentials
//		NodeName:       "node-1",
//		Resources:      nodeResources,   // resources.Node
//		Pressure:       evictionManager, // eviction.Manager
//		Images:         imageManager,    // images.Manager
//		MaxImages:      50,
//		Runtime:        runtimeInfo,
//		Readiness:      runtimeState.Err,
//		KubeletVersion: "v1.37.1",
//		Logger:         logger,
//	})
//	if err != nil {
//		return err
//	}
//	go ctl.Run(ctx) // until ctx ends
//	...
//	if node, ok := ctl.Node(); ok {
//		_ = node.Status.Allocatable // pod admission
//	}
package nodestatus
