// Package types holds the small types the kubelet's packages share: pod updates from
// the pod sources, the runtime-neutral view of pods and containers that the runtime
// manager reports (the kubelet's "kubecontainer" types), sync results, and the
// well-known label and annotation keys.
//
// It is a leaf: it imports no internal package. Any kubelet-side package may import it.
package types
