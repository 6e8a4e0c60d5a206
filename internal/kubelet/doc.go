// Package kubelet is the coordinator of a standalone node: it takes pods from the
// pod sources (static manifest files, a manifest URL), keeps them running through
// the pod workers and the runtime manager, and keeps their API status.
//
// The pieces it drives are built before it (internal/app) and passed in
// through Options.Parts, each behind a small interface declared here (the
// runtime manager and its streaming side, the runtime helper, the runtime
// state, the PLEG, the prober, the volume manager, the pod sources). The
// package implements the pod workers' SyncFuncs (SyncPod, SyncTerminatingPod,
// SyncTerminatedPod, see syncer.go) and the kubelet API's HostInterface
// (serverapi.go); its other jobs live in their own packages: the runtime
// helper (internal/kubelet/runtimehelper: env, mounts, DNS, hostname), pod
// admission (internal/kubelet/admission), the API pod status
// (internal/kubelet/apistatus) and the runtime's health
// (internal/kubelet/runtimestate).
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
// Beside the loop, Run runs the PLEG and container garbage collection every
// GCInterval. While the runtime state (runtimestate, run by its owner) says
// the runtime is not ready, the loop dispatches nothing, and pods off the host
// network are not synced while its network is not ready. The caller runs the
// pod sources (podsource.Source.Run) and the runtime manager's own loops
// (kuberuntime.Manager.Start).
//
// When Run's ctx ends, the loop stops and the pod workers are stopped; pods are
// NOT killed, so containers keep running across kubelet restarts.
//
// Wiring, in dependency order (see internal/app): the pod manager first, so
// that every manager counting pods is given its ActivePods when built; the
// kubelet then applies the sources' updates to it and installs its test of a
// pod being active.
//
//	pods := podmanager.New()
//	results := prober.NewResults()
//	helper, _ := runtimehelper.New(runtimehelper.Options{RootDir: root, DNS: dnsConfigurer, Node: res, ...})
//	rt, _ := kuberuntime.New(kuberuntime.Options{Helper: helper, ProbeResults: results, ...})
//	state, _ := runtimestate.New(runtimestate.Options{Runtime: rt})
//	st := status.NewManager(status.Options{Logger: logger})
//	probes := prober.NewManager(prober.Options{Runner: rt, Results: results, Status: st})
//	kl, _ := kubelet.New(kubelet.Options{Parts: kubelet.Parts{Pods: pods, Runtime: rt, Streaming: rt, Helper: helper,
//		State: state, Status: st, Prober: probes, ...}})
//	go state.Run(ctx); go sources.Run(ctx); rt.Start(ctx)
//	err := kl.Run(ctx)
//
// Only internal/app may import this package.
package kubelet
