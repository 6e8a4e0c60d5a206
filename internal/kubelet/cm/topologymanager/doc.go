// Package topologymanager is upstream's topology manager: at admission it
// asks the hint providers (the device and CPU managers) on which NUMA nodes
// each container (container scope) or the whole pod (pod scope) could get
// its resources, merges their hints by the policy (none, best-effort,
// restricted, single-numa-node; the options prefer-closest-numa-nodes and
// max-allowable-numa-nodes), refuses the pod with TopologyAffinityError
// when the policy requires an alignment that cannot be had, and has the
// providers allocate with the merged NUMA affinity.
//
// It is a leaf: it imports nothing of this module. The kubelet runs it as
// its resource allocation admit handler; the providers implement
// HintProvider.
package topologymanager
