// Package e2e holds end-to-end tests that run the kubelet binary against real Docker and containerd; it has no non-test code.
//
// The tests build the binary once (TestMain), start a private dockerd on temp
// directories (a kubelet kills every pod it did not start, so it must never share
// a Docker daemon with other users), and run one kubelet per test with its own
// CNI bridge and subnet and a unique pod namespace. Standalone tests give it
// static pod manifests only; the cluster tests (cluster_*_integration_test.go)
// start one real control plane (scripts/controlplane.sh through
// internal/testutil/controlplane) and join each kubelet to it. Tests never run
// in parallel: two kubelets on one Docker daemon would kill each other's pods as
// orphans. Nothing in this package may be imported.
package e2e
