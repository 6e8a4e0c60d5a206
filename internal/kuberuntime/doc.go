// Package kuberuntime is the kubelet's runtime manager: it turns a desired pod
// (a k8s.io/api/core/v1 Pod) into CRI calls on a runtime reached only through the
// k8s.io/cri-api interfaces (internalapi.RuntimeService and ImageManagerService).
//
// The heart of it is a plan-then-execute pair, as in the upstream kubelet:
// computePodActions compares the pod spec with the runtime's view of the pod
// (types.PodStatus) and returns a plain podActions value; SyncPod carries that plan
// out in numbered steps (kill, create the sandbox, start init containers and
// sidecars, start containers). Around it live KillPod (preStop hooks, grace
// periods), GetPodStatus/GetPods (CRI state converted into the kubelet's types),
// GarbageCollect (dead containers, sandboxes and pod log directories), lifecycle
// hooks, the image puller and container log handling.
//
// Containers and sandboxes carry the upstream io.kubernetes.* labels and
// annotations, so tools that read a node managed by the upstream kubelet read this
// one the same way.
//
// Who may import it: internal/app (which builds the Manager) and, through small
// interfaces they declare, internal/kubelet and its subpackages. It imports only
// internal/kubelet/container from this module and never the dockershim.
//
// Usage:
//
//	m, err := kuberuntime.New(kuberuntime.Options{
//		Runtime:     runtimeService, // internalapi.RuntimeService
//		Images:      imageService,   // internalapi.ImageManagerService
//		Helper:      runtimeHelper,  // container.RuntimeHelper
//		RuntimeName: "docker",
//		MachineMemoryBytes: machine.MemoryCapacity, // resources.Machine
//		Logger:      logger,
//	})
//	if err != nil {
//		return err
//	}
//	m.Start(ctx) // container log rotation
//	status, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
//	result := m.SyncPod(ctx, pod, status, nil, crashLoopBackOff, false)
package kuberuntime
