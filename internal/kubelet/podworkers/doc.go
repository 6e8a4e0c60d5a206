// Package podworkers drives every pod through its lifecycle on the node, one
// goroutine per pod UID. It is the kubelet's source of truth for which pods may
// have running containers.
//
// Who may import it: internal/kubelet (the coordinator) and tests. It imports
// internal/kubelet/container only; the kubelet supplies the sync steps (SyncFuncs)
// and the pod status cache (StatusCache, satisfied by *kubecontainer.Cache).
//
// # State machine
//
// Each pod UID moves through these states, never backwards:
//
//	           UpdatePod (first time)
//	                  |
//	                  v
//	+---------> [ waiting to start ] -- static pods wait here while another pod
//	|                 |                 with the same name+namespace runs
//	|                 v
//	|         [ SyncPod: syncing ] <---- resync every ResyncInterval, retry after
//	|                 |                  BackOffPeriod on error, or at once on an update
//	|    kill / deletion / terminal phase / SyncPod says terminal / orphaned
//	|                 v
//	|     [ TerminatingPod ] -- SyncTerminatingPod(gracePeriod) until it succeeds;
//	|                 |         a shorter grace period interrupts and restarts it
//	|                 v
//	|     [ TerminatedPod ] -- SyncTerminatedPod until it succeeds; CompletedCh of
//	|                 |        every kill request was closed on entering this state
//	|                 v
//	|     [ finished ] -- the goroutine exits; every update for the UID is
//	|                 |    ignored (a finished pod never restarts)
//	|                 v
//	+--- SyncKnownPods forgets the UID once it is no longer desired (or when a
//	     create for the same UID arrived while it was terminating); only then
//	     may the UID start again
//
// Rules the implementation keeps:
//
//   - UpdatePod never blocks. Updates that arrive while the worker is busy are
//     merged into one pending update: the newest pod spec wins, while a request
//     to terminate is recorded in the pod's state, so it is never lost.
//   - Termination is requested by a SyncPodKill update, by a pod with a deletion
//     timestamp or a terminal phase (Succeeded/Failed), by an update with only a
//     RunningPod (an orphan found in the runtime), when SyncPod returns
//     isTerminal, or when SyncKnownPods finds a started pod no longer desired.
//     Requesting termination cancels the context of the sync in flight.
//   - The grace period only shrinks: the smallest of the pod's deletion grace
//     period and every kill's override wins (the pod's
//     terminationGracePeriodSeconds when nothing was requested), at least 1s. A
//     shorter request cancels a SyncTerminatingPod in flight, which is then
//     called again with the shorter period.
//   - Before each sync the worker waits (StatusCache.GetNewerThan) for a runtime
//     status newer than the end of its previous sync, so it never acts twice on
//     the same observation.
//   - After a sync the worker resyncs by itself: after ResyncInterval on
//     success, after BackOffPeriod on error, at once after a state change or
//     when another update is pending, whichever comes first.
//   - A RunningPod-only (orphan) worker runs only the terminating step and is
//     forgotten as soon as that succeeds.
//   - Stop cancels every worker's context and waits for the goroutines.
//
// Usage:
//
//	w := podworkers.New(podworkers.Options{Sync: kubelet, Cache: plegCache, Logger: logger})
//	defer w.Stop()
//	w.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodCreate, Pod: pod})
//	// later, from housekeeping:
//	known := w.SyncKnownPods(desiredPods)
package podworkers
