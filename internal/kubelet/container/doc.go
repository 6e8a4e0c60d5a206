// Package container holds what the kubelet's packages and the runtime manager
// share (upstream's kubelet/container, "kubecontainer"): the runtime-neutral
// view of pods and containers the runtime manager reports (Pod, PodStatus,
// ContainerStatus, ContainerID), the runtime cache of pod statuses the PLEG
// fills and the pod workers read (Cache), sync results and their reasons, pod
// updates from the pod sources, and the well-known annotation keys.
//
// It is a leaf below both internal/kuberuntime and the kubelet's packages: it
// imports no package of this module, and it is the only package under
// internal/kubelet that internal/kuberuntime may import (internal/archtest).
package container
