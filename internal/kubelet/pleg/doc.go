// Package pleg is the kubelet's pod lifecycle event generator: it watches the
// container runtime, keeps the pod status cache current and tells the sync loop
// which pods changed.
//
// GenericPLEG relists the runtime periodically (GetPods with all=true), compares
// every container and sandbox of every pod with the previous relist and emits
// ContainerStarted, ContainerDied and ContainerRemoved events (ContainerChanged,
// a move into an unknown or created state, only refreshes the cache). For every
// pod with changes it reads the pod's status from the runtime into the Cache;
// a pod whose status could not be read is retried on the next relist. After each
// relist the cache's global timestamp moves forward, which tells the pod workers
// waiting in Cache.GetNewerThan that every pod is current as of that relist.
//
// EventedPLEG (optional) subscribes to the runtime's CRI container events and
// refreshes a pod as soon as one of its containers changes; the generic relist
// keeps running as a slow safety net and takes over at the normal period while
// the event stream is down.
//
// Who may import it: internal/kubelet (the coordinator) and tests. It imports
// internal/kubelet/container only; the runtime is reached through the small Runtime
// interface declared here, which *kuberuntime.Manager satisfies.
//
// Usage:
//
//	cache := kubecontainer.NewCache()
//	p := pleg.NewGeneric(pleg.Options{Runtime: runtimeManager, Cache: cache, Logger: logger})
//	go p.Run(ctx)
//	for ev := range p.Watch() {
//		// dispatch ev.ID to its pod worker
//	}
package pleg
