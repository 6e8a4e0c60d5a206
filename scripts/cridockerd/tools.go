//go:build tools

// Package cridockerd pins cri-dockerd v0.4.3, which scripts/build-controlplane.sh
// builds for the live-switch test (adopting the sandboxes of upstream's kubelet
// on cri-dockerd). It is never compiled (build tag "tools"). Its own module:
// cri-dockerd needs k8s.io/kubernetes v1.29 through its replace block, which
// cannot live beside the control plane's v1.37. Refresh with `go get`, never
// `go mod tidy` (tidy fails on an ambiguous import in cri-dockerd's test-only
// dependencies).
package cridockerd

import _ "github.com/Mirantis/cri-dockerd"
