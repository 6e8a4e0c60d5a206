// Package memorymanager is the memory manager (memoryManagerPolicy None or
// Static, reservedMemory): with Static, the memory and huge pages of each
// container of a Guaranteed pod are pinned at admission to a set of NUMA
// nodes, which the container gets as its cpuset.mems. It is a topology
// manager hint provider (after the device and CPU managers, as upstream) and
// keeps its state in memory_manager_state (package state), in upstream's
// format, so that a node can switch between this kubelet and upstream's.
//
// Upstream's rules, kept here:
//   - a NUMA node is used either alone (single-NUMA blocks) or as part of
//     one group of nodes (cross-NUMA blocks), never both;
//   - the memory of a regular init container is reused by the containers
//     after it (it is released when the next container starts);
//   - the sum of reservedMemory per resource must equal the node
//     allocatable reservation of that resource (systemReserved +
//     kubeReserved + the hard eviction threshold), and Static needs some
//     reserved memory.
//
// Pod-level resources (PodLevelResourceManagers, off by default upstream)
// are not pinned: such pods are skipped, as upstream does with the gate off.
//
// Only internal/app builds it; the kubelet reaches it through its own
// interfaces.
package memorymanager
