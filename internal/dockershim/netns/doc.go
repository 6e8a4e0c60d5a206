// Package netns pins the network namespaces of pod sandboxes.
//
// A sandbox's network namespace belongs to its pause process: Docker mounts
// it under its exec-root only while the container runs. When the pause
// process dies first (dockerd restarted without live-restore, the process
// killed, the container removed by hand), the namespace and the pod's
// interface in it go with it, and CNI DEL then runs without a namespace.
// Plugins that find what to undo by looking inside the namespace leave it
// behind: the reference bridge plugin releases the IP but keeps the pod's
// masquerade chain (containernetworking/plugins#810). containerd avoids this
// by creating the namespace itself and bind-mounting it; the shim cannot
// create it (Docker does), so it bind-mounts Docker's as soon as the pause
// process runs and hands CNI that path for ADD and DEL. The mount keeps the
// namespace alive until the shim unpins it after DEL.
//
// Usage:
//
//	pins, err := netns.New(filepath.Join(root, "netns"))
//	path, err := pins.Pin(sandboxID, pausePID) // before CNI ADD
//	path = pins.Path(sandboxID)                // "" if not pinned
//	err = pins.Unpin(sandboxID)                // after CNI DEL
package netns
