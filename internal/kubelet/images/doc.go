// Package images garbage-collects the node's container images and reports the
// image list for node.status.images.
//
// A Manager keeps one record per image ID: when the image was first detected,
// when a container (running or exited) last referenced it, its size and whether
// the runtime pinned it. GarbageCollect applies the Policy the way the upstream
// kubelet's pkg/kubelet/images does:
//
//  1. detect: list images and containers, refresh the records;
//  2. order: drop in-use and pinned images, sort the rest by lastUsed (oldest
//     first), ties by firstDetected;
//  3. age: when MaxAge > 0 and the kubelet has run longer than MaxAge, remove
//     every candidate unused for longer than MaxAge (reason "age");
//  4. space: when image filesystem usage is at or above HighThresholdPercent,
//     remove candidates at least MinAge old until usage would drop to
//     LowThresholdPercent (reason "space").
//
// DeleteUnusedImages is step 4 without a target (the eviction manager's disk
// reclaim). Every removal increments kubelet_image_garbage_collected_total.
// NodeImages serves node.status.images from a list refreshed every 30 seconds.
//
// Who may import it: internal/kubelet (the coordinator, the node status
// setters and the eviction manager) and internal/app for wiring. It imports no
// other package of this module.
//
// Usage:
//
//	m, err := images.New(images.Options{
//		Images: imageService, Containers: runtimeService, Fs: statsProvider,
//		Policy: images.Policy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute},
//		Event:  func(typ, reason, msg string) { recorder.Event(nodeRef, typ, reason, msg) },
//		Registerer: reg, Logger: log,
//	})
//	if err != nil {
//		return err
//	}
//	go m.Start(ctx)
//	node.Status.Images = m.NodeImages(50)
package images
