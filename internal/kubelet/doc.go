// Package kubelet is the coordinator of a standalone node: it takes pods from the
// pod sources (static manifest files, a manifest URL), keeps them running through
// the pod workers and the runtime manager, and keeps their API status.
//
// The pieces it drives are built elsewhere and passed in through Options, each
// behind a small interface declared here (the runtime manager, the PLEG, the
// prober, the volume manager, the DNS configurer). The package implements the two
// callbacks those pieces need from the kubelet: the pod workers' SyncFuncs
// (SyncPod, SyncTerminatingPod, SyncTerminatedPod, see syncer.go) and the runtime
// manager's kuberuntime.RuntimeHelper (env, mounts, hostname; see RuntimeHelper).
//
// Run is the sync loop, following upstream's syncLoopIteration:
//
//  1. source updates: each source sends its full state (SET); it is diffed by pod
//     UID against what the source sent before, giving adds (admitted, then
//     UpdatePod(SyncPodCreate)), updates (UpdatePod(SyncPodUpdate)) and removals
//     (UpdatePod(SyncPodKill)). A changed static manifest has a new UID, so it is a
//     removal of the old pod plus an add of the new one.
//  2. PLEG events: UpdatePod(SyncPodSync) for the pod (ContainerRemoved ignored).
//  3. probe results: readiness and startup results go to the status manager, and
//     any result (a liveness failure restarts the container) triggers a sync.
//  4. resync: the pod workers resync each pod every ResyncInterval themselves.
//  5. housekeeping every HousekeepingInterval: the pod workers forget terminated
//     pods that are no longer desired, probes and statuses of gone pods are
//     dropped, orphaned pod directories are removed, desired pods the workers do
//     not know (UID reuse) are started, and runtime pods without a config are
//     killed.
//
// Beside the loop, Run runs the PLEG, a runtime health check every 5s (while the
// runtime is not ready the loop dispatches nothing, and pods off the host network
// are not synced while its network is not ready) and container garbage
// collection every GCInterval. The caller runs the pod sources
// (podsource.Source.Run) and the runtime manager's own loops
// (kuberuntime.Manager.Start).
//
// When Run's ctx ends, the loop stops and the pod workers are stopped; pods are
// NOT killed, so containers keep running across kubelet restarts.
//
// Wiring (the runtime manager and the kubelet call each other, so the
// RuntimeHelper is built first; the status manager is shared with the prober):
//
//	st := status.NewManager(status.Options{Logger: logger})
//	opts := kubelet.Options{NodeName: name, NodeIP: ip, DNS: dnsConfigurer, Status: st, ...}
//	opts.Helper, _ = kubelet.NewRuntimeHelper(opts)
//	rt, _ := kuberuntime.New(kuberuntime.Options{Helper: opts.Helper, Recorder: opts.Recorder, ...})
//	opts.Runtime, opts.PLEG, opts.Cache, opts.Prober, opts.Volumes, opts.Sources = rt, ...
//	kl, _ := kubelet.New(opts)
//	go sources.Run(ctx); rt.Start(ctx)
//	err := kl.Run(ctx)
//
// Only internal/app may import this package.
package kubelet
