package kuberuntime

import (
	"encoding/json"
	"fmt"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/dump"
)

// hashContainer returns the hash of a container spec that is recorded in the
// io.kubernetes.container.hash annotation; a running container whose recorded
// hash differs from its spec's hash is restarted.
//
// It is upstream 1.37's hash, so that containers survive a switch between
// this kubelet and upstream's: FNV-1a (32 bit) over the spew dump (for
// hashing: sorted keys, no methods, no pointer addresses) of the JSON of the
// container's name and image only. Everything else of a container is either
// immutable in the API (an API pod's spec), part of a static pod's UID (any
// edit of its manifest is a new pod), or changed in place without a restart
// (resources, through a resize).
func hashContainer(container *v1.Container) uint64 {
	data, err := json.Marshal(map[string]string{"name": container.Name, "image": container.Image})
	if err != nil {
		// A map of strings always encodes.
		panic(fmt.Sprintf("encode the hashed fields of container %q: %v", container.Name, err))
	}
	h := fnv.New32a()
	_, _ = fmt.Fprintf(h, "%v", dump.ForHash(data))
	return uint64(h.Sum32())
}

// containerChanged reports whether the running container was created from a
// different spec than the desired one.
func containerChanged(container *v1.Container, recordedHash uint64) bool {
	return hashContainer(container) != recordedHash
}
