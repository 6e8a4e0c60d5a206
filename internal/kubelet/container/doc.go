// Package container holds what the kubelet's packages and the runtime manager
// share (upstream's kubelet/container, "kubecontainer"): the runtime-neutral
// view of pods and containers the runtime manager reports (Pod, PodStatus,
// ContainerStatus, ContainerID), the runtime cache of pod statuses the PLEG
// fills and the pod workers read (Cache), sync results and their reasons, pod
// updates from the pod sources, the well-known annotation keys, and the
// contract between the kubelet and the runtime manager: RuntimeHelper and what
// it resolves for a container (RunContainerOptions, EnvVar, Mount,
// DeviceInfo), EventRecorder, and the container GC's GCPolicy and
// PodStateProvider (upstream keeps these in kubelet/container too).
//
// It is a leaf below both internal/kuberuntime and the kubelet's packages: it
// imports no package of this module, and it is the only package under
// internal/kubelet that internal/kuberuntime may import, while no package
// under internal/kubelet imports internal/kuberuntime (internal/archtest): the
// kubelet drives the runtime manager through interfaces it declares, and only
// the composition root (internal/app) builds it.
package container
