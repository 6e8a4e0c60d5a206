// Package resources is the one home of the node's resources: the machine read
// once at start (CPUs, memory, huge pages, the root filesystem and the machine
// identifiers, as upstream's cached cAdvisor MachineInfo), the node's capacity
// and allocatable (capacity minus systemReserved, kubeReserved and the hard
// eviction thresholds, as upstream's node allocatable), the hard eviction
// thresholds parsed as upstream parses them, and the one resolver of the
// downward API's resourceFieldRef (env and volume files).
//
// Node is a live value: later managers (device plugins) change the capacity at
// run time through SetExtendedCapacity, and readers (node status, admission,
// the downward API, stats) ask for the current capacity or allocatable each
// time they need it.
//
// It is a leaf of the kubelet side: it imports only internal/procfs of this
// module (internal/archtest), so every kubelet package may use it.
package resources
