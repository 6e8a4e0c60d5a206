// Package apistatus computes a pod's API status (v1.PodStatus) from the
// runtime's view of it (upstream's generateAPIPodStatus): container statuses
// with upstream's waiting reasons (ContainerCreating, PodInitializing, and the
// start failures of the last sync kept in a ReasonCache), the phase, the
// kubelet-owned conditions, the pod and host IPs and the start time, on top of
// the status the kubelet set before (the status manager).
//
// Only internal/kubelet (the coordinator) and internal/app may import it.
package apistatus
