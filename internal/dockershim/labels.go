package dockershim

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Docker labels written by the shim. The first three follow the legacy dockershim so
// that tools reading Docker labels keep working; the rest are this shim's own.
const (
	labelType      = "io.kubernetes.docker.type"
	labelSandboxID = "io.kubernetes.sandbox.id"
	labelLogPath   = "io.kubernetes.container.logpath"
	labelMetadata  = "io.kubelet-dockershim.metadata"
	labelHandler   = "io.kubelet-dockershim.runtime-handler"
	labelImage     = "io.kubelet-dockershim.image"
	// labelUserImage is the image as the pod spec names it
	// (ImageSpec.user_specified_image), reported back in statuses.
	labelUserImage     = "io.kubelet-dockershim.user-specified-image"
	labelNamespaceOpts = "io.kubelet-dockershim.namespace-options"
	labelHostNetwork   = "io.kubelet-dockershim.host-network"
	// labelLogDirectory is the sandbox's log_directory, the only one its
	// containers' log paths may be under.
	labelLogDirectory = "io.kubelet-dockershim.log-directory"
	// labelKeys lists the client's CRI label keys (comma separated), so that labels
	// Docker copies from the image are not reported as the client's.
	labelKeys = "io.kubelet-dockershim.label-keys"
	// labelUnified holds a container's CRI unified resources (JSON), written
	// into its cgroup when it starts: Docker has no field for them.
	labelUnified = "io.kubelet-dockershim.unified"
	// labelManaged marks every object the shim created, for listing.
	labelManaged = "io.kubelet-dockershim.managed"

	typeSandbox   = "podsandbox"
	typeContainer = "container"

	// annotationPrefix stores CRI annotations as Docker labels.
	annotationPrefix = "annotation."
)

// internalLabel reports whether a Docker label key belongs to the shim, not the client.
func internalLabel(k string) bool {
	switch k {
	case labelType, labelSandboxID, labelLogPath, labelMetadata, labelHandler, labelImage, labelUserImage,
		labelNamespaceOpts, labelHostNetwork, labelLogDirectory, labelManaged, labelKeys, labelUnified:
		return true
	}
	return false
}

// makeLabels merges CRI labels, CRI annotations (prefixed) and the shim's own labels.
func makeLabels(labels, annotations, internal map[string]string) map[string]string {
	out := make(map[string]string, len(labels)+len(annotations)+len(internal)+1)
	for k, v := range labels {
		out[k] = v
	}
	for k, v := range annotations {
		out[annotationPrefix+k] = v
	}
	for k, v := range internal {
		out[k] = v
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out[labelKeys] = strings.Join(keys, ",")
	out[labelManaged] = "true"
	return out
}

// splitLabels recovers CRI labels and annotations from Docker labels. Labels Docker
// merged in from the image are dropped when the key list label says which are the
// client's (objects made by other shims have no such list: all labels count).
func splitLabels(docker map[string]string) (labels, annotations map[string]string) {
	labels, annotations = map[string]string{}, map[string]string{}
	keys, haveKeys := docker[labelKeys]
	clientKey := func(k string) bool {
		if !haveKeys {
			return true
		}
		for _, c := range strings.Split(keys, ",") {
			if c == k {
				return true
			}
		}
		return false
	}
	for k, v := range docker {
		switch {
		case internalLabel(k):
		case haveKeys && clientKey(k): // a client label, even one named annotation.*
			labels[k] = v
		case strings.HasPrefix(k, annotationPrefix):
			annotations[strings.TrimPrefix(k, annotationPrefix)] = v
		case clientKey(k):
			labels[k] = v
		}
	}
	return labels, annotations
}

// encodeJSONLabel marshals v for a label value.
func encodeJSONLabel(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("encode label: %w", err)
	}
	return string(b), nil
}

// sandboxMetadata decodes the sandbox metadata label (nil when absent or broken).
func sandboxMetadata(labels map[string]string) *runtimeapi.PodSandboxMetadata {
	m := &runtimeapi.PodSandboxMetadata{}
	if err := json.Unmarshal([]byte(labels[labelMetadata]), m); err != nil {
		return nil
	}
	return m
}

// containerMetadata decodes the container metadata label (nil when absent or broken).
func containerMetadata(labels map[string]string) *runtimeapi.ContainerMetadata {
	m := &runtimeapi.ContainerMetadata{}
	if err := json.Unmarshal([]byte(labels[labelMetadata]), m); err != nil {
		return nil
	}
	return m
}

// namespaceOptions decodes the sandbox's namespace options label.
func namespaceOptions(labels map[string]string) *runtimeapi.NamespaceOption {
	o := &runtimeapi.NamespaceOption{}
	if err := json.Unmarshal([]byte(labels[labelNamespaceOpts]), o); err != nil {
		return &runtimeapi.NamespaceOption{}
	}
	return o
}

// matchLabels reports whether all selector pairs are present in labels.
func matchLabels(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// selectorFilters turns a CRI label selector into Docker label filters
// ("k=v"), so that Docker lists only the objects that may match (a client
// label is stored as the Docker label of the same key). They only narrow
// what Docker returns: matchLabels still decides on the client's labels.
func selectorFilters(selector map[string]string) []string {
	out := make([]string, 0, len(selector))
	for k, v := range selector {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// userSpecifiedImage is the image as the client's user named it: its
// user_specified_image, else (objects made before it was kept, or clients
// that do not set it) the image the container was created from.
func userSpecifiedImage(labels map[string]string) string {
	if v := labels[labelUserImage]; v != "" {
		return v
	}
	return labels[labelImage]
}
