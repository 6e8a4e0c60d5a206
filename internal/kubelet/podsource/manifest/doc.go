// Package manifest decodes static pod manifests as upstream's kubelet does:
// strictly (YAML or JSON, unknown fields are errors; a PodList only from a
// URL), defaulted like the API server's v1 defaults, validated with the API
// server's messages, with the static pod's name, UID and config annotations.
//
// It is pure logic over its arguments; internal/kubelet/podsource reads the
// files and URLs. A package of its own so that its fuzz target builds
// without the API source's client-go.
package manifest
