// Package apistatus computes a pod's API status (v1.PodStatus) from the
// runtime's view of it (upstream's generateAPIPodStatus): container statuses
// with upstream's waiting reasons (ContainerCreating, PodInitializing, and the
// start failures of the last sync kept in a ReasonCache), the phase, the
// kubelet-owned conditions, the pod and host IPs, the start time and, with
// in-place resize, the allocated and applied resources of the containers and
// of the pod itself (its cgroup), on top of the status the kubelet set before
// (the status manager).
//
// Only internal/kubelet (the coordinator) and internal/app may import it.
package apistatus
