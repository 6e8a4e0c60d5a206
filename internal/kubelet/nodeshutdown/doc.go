// Package nodeshutdown is the kubelet's graceful node shutdown, as upstream's
// Linux node shutdown manager: it holds a systemd-logind "delay" inhibitor
// lock on shutdown, and when logind announces a shutdown (PrepareForShutdown)
// it refuses new pods, reports the node as shutting down, stops the running
// pods in priority order within the configured grace periods and then
// releases the lock so that the shutdown proceeds. It makes sure logind's
// InhibitDelayMaxSec covers the grace period by writing the drop-in
// /etc/systemd/logind.conf.d/99-kubelet.conf and reloading logind, records
// the last shutdown in <root dir>/graceful_node_shutdown_state and exports
// kubelet_graceful_shutdown_start_time_seconds and
// kubelet_graceful_shutdown_end_time_seconds.
//
// Messages, reasons, events, files and metrics are upstream's, so that what
// users and tools observe is the same.
//
// Only internal/app (which wires the kubelet) imports this package:
//
//	m, err := nodeshutdown.New(nodeshutdown.Options{
//		ShutdownGracePeriod:             30 * time.Second,
//		ShutdownGracePeriodCriticalPods: 10 * time.Second,
//		ActivePods:                      kl.ActivePods,
//		KillPod:                         kl.KillPodNow,
//		StateDir:                        rootDir,
//		Registerer:                      registry,
//		Logger:                          logger,
//	})
//	if err != nil {
//		return err
//	}
//	if err := m.Start(ctx); err != nil {
//		logger.Warn("Failed to start node shutdown manager", zap.Error(err))
//	}
//	// m.Admit is an admission check; m.ShutdownStatus feeds the Ready condition.
package nodeshutdown
