package core

import (
	"encoding/hex"
	"fmt"
	"hash/fnv"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/dump"
)

// StaticPodUID is the UID upstream's kubelet gives a static pod that sets
// none: the hex FNV-128a of the dump (for hashing) of the decoded, defaulted
// pod in its internal form, followed by its source: "host:<node>" and
// "file:<path>" for a manifest file, "url:<url>" for --manifest-url. pod is
// the v1 pod decoded and defaulted, before the kubelet names it
// (<name>-<node>) or sets anything else.
func StaticPodUID(pod *v1.Pod, nodeName, source string, isFile bool) string {
	internal := FromV1(pod)
	// Decoded into the internal version, a pod carries no apiVersion/kind.
	internal.TypeMeta = metav1.TypeMeta{}
	h := fnv.New128a()
	_, _ = fmt.Fprintf(h, "%v", dump.ForHash(internal))
	if isFile {
		_, _ = fmt.Fprintf(h, "host:%s", nodeName)
		_, _ = fmt.Fprintf(h, "file:%s", source)
	} else {
		_, _ = fmt.Fprintf(h, "url:%s", source)
	}
	return hex.EncodeToString(h.Sum(nil))
}
