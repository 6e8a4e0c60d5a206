package kuberuntime

import (
	"encoding/json"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
)

// hashContainer returns the hash of a container spec that is recorded in the
// io.kubernetes.container.hash annotation; a running container whose recorded
// hash differs from its spec's hash is restarted.
//
// It is FNV-1a (64 bit) over the JSON encoding of the whole v1.Container.
// encoding/json writes struct fields in declaration order and map keys sorted,
// and resource quantities in canonical form, so the same spec hashes the same in
// every kubelet run. Every field counts, resources included: the kubelet has no
// in-place update, so any change to a container's spec means a new container.
func hashContainer(container *v1.Container) uint64 {
	data, err := json.Marshal(container)
	if err != nil {
		// A v1.Container always encodes; a failure would be a programming error.
		// Hash the name so the result is still deterministic.
		data = []byte(container.Name)
	}
	h := fnv.New64a()
	_, _ = h.Write(data)
	return h.Sum64()
}

// containerChanged reports whether the running container was created from a
// different spec than the desired one.
func containerChanged(container *v1.Container, recordedHash uint64) bool {
	return hashContainer(container) != recordedHash
}
