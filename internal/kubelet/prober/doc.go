// Package prober runs the kubelet's liveness, readiness and startup probes.
//
// The Manager starts one worker goroutine per (pod, container, probe type) in AddPod.
// A worker reads the pod's latest v1.PodStatus from a StatusProvider, waits
// initialDelaySeconds after the container started, then probes every periodSeconds
// (exec through a Runner, httpGet, tcpSocket or grpc, each bounded by timeoutSeconds)
// and applies successThreshold and failureThreshold before it records a result. A
// startup probe gates the other two: liveness and readiness probes do not run until the
// container has started. Results are cached per container ID in a Results, and
// every change is published on LivenessUpdates, ReadinessUpdates or StartupUpdates.
// Results is built on its own, before the Manager and the runtime manager: the
// runtime manager reads the failures from it while the Manager execs through
// the runtime manager, so neither has to exist before the other. UpdatePodStatus
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
//	results := prober.NewResults()
//	runtimeManager, _ := kuberuntime.New(kuberuntime.Options{ProbeResults: results, ...})
//	m := prober.NewManager(prober.Options{Runner: runtimeManager, Results: results, Status: statusManager, Logger: log})
//	m.AddPod(runCtx, pod)               // on every pod sync; idempotent
//	m.UpdatePodStatus(pod.UID, &status) // while generating the API status
//	for u := range m.LivenessUpdates() { /* restart u.ContainerID on Failure */ }
//	m.RemovePod(pod)                    // when the pod is gone
package prober
