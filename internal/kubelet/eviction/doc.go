// Package eviction is the kubelet's node-pressure eviction manager, as
// upstream's: it samples the eviction signals (memory.available,
// allocatableMemory.available, nodefs.*, imagefs.*, containerfs.*,
// pid.available) every monitoring interval, compares them with the hard and
// soft thresholds, reports the MemoryPressure, DiskPressure and PIDPressure
// node conditions (on at once, off a transition period after the pressure was
// last seen), refuses pods the node cannot take under pressure, reclaims
// node-level resources first for disk pressure (dead containers, then unused
// images) and otherwise evicts at most one pod per interval, ranked as
// upstream ranks them. It also enforces local ephemeral storage limits
// (emptyDir sizeLimit, the pod's and each container's ephemeral-storage
// limit).
//
// Statuses, messages, events and metrics are upstream's, so that what users
// and tools observe is the same.
package eviction
