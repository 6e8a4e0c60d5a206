// Package prober runs the kubelet's liveness, readiness and startup probes.
//
// The Manager starts one worker goroutine per (pod, container, probe type) in AddPod.
// A worker reads the pod's latest v1.PodStatus from a StatusProvider, waits
// initialDelaySeconds after the container started, then probes every periodSeconds
// (exec through a Runner, httpGet, tcpSocket or grpc, each bounded by timeoutSeconds)
// and applies successThreshold and failureThreshold before it records a result. A
// startup probe gates the other two: liveness and readiness probes do not run until the
// container has started. Results are cached per container ID, and every change is
// published on LivenessUpdates, ReadinessUpdates or StartupUpdates. UpdatePodStatus
// copies the cached results into a v1.PodStatus (ContainerStatus.Ready and Started).
// The caller must drain all three update channels: a worker waits while its channel is
// full.
//
// The behaviour follows the upstream kubelet's pkg/kubelet/prober.
//
// Who may import it: internal/kubelet (the coordinator) and internal/app for wiring.
// It imports only internal/kubelet/container.
//
// Usage:
//
//	m := prober.NewManager(prober.Options{Runner: runtimeManager, Status: statusManager, Logger: log})
//	m.AddPod(runCtx, pod)               // on every pod sync; idempotent
//	m.UpdatePodStatus(pod.UID, &status) // while generating the API status
//	for u := range m.LivenessUpdates() { /* restart u.ContainerID on Failure */ }
//	m.RemovePod(pod)                    // when the pod is gone
package prober
