// Package containerlog writes container output into CRI-format log files, the format
// containerd writes and the kubelet reads:
//
//	2024-05-06T07:08:09.123456789Z stdout F a full line
//	2024-05-06T07:08:09.223456789Z stderr P the first part of a long line,
//	2024-05-06T07:08:09.223456789Z stderr F continued here
//
// The dockershim runs containers with Docker's own log driver; for each container a
// Manager follows Docker's log stream (the equivalent of `docker logs --follow
// --timestamps --since`) and appends it to the container's CRI log path. A copier
// resumes after the last timestamp already in the file, so a shim restart neither loses
// nor duplicates lines (except in the crash window between the pieces of one line longer
// than 16 KiB, which share a timestamp). When the kubelet rotates the file it calls
// Reopen.
//
// Log files below the log root (Options.LogRoot, the kubelet's /var/log/pods)
// are created, truncated and opened through an os.Root opened on it, one
// directory at a time without following symbolic links: a pod's log
// directory replaced by a link cannot lead the shim's writes elsewhere.
//
// TTY containers have a raw (not multiplexed) stream in which Docker's message
// boundaries are not marked; a line longer than 16 KiB is recognised by the timestamp
// that Docker puts at every 16 KiB boundary.
//
// Only the dockershim (internal/dockershim) may import this package. It imports only
// internal/dockershim/libdocker, for the LogsOptions type and the stream demultiplexer.
//
// Usage:
//
//	m, err := containerlog.NewManager(containerlog.Options{Source: dockerClient, LogRoot: "/var/log/pods", Logger: logger})
//	if err != nil { ... }
//	m.Follow(runCtx, containerID, "/var/log/pods/ns_pod_uid/app/0.log", false)
//	// after the container exited:
//	_ = m.Wait(ctx, containerID)
//	// after the kubelet renamed the file:
//	_ = m.Reopen(containerID)
//	// when the container is removed:
//	m.Stop(containerID)
package containerlog
