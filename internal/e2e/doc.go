// Package e2e holds end-to-end tests that run the kubelet binary against real Docker and containerd; it has no non-test code.
//
// The tests build the binary once (TestMain), start a private dockerd on temp
// directories (a kubelet kills every pod it did not start, so it must never share
// a Docker daemon with other users), and run one standalone kubelet per test
// with static pod manifests, its own CNI bridge and subnet, and a unique pod
// namespace. Tests never run in parallel: two kubelets on one Docker daemon
// would kill each other's pods as orphans. Nothing in this package may be imported.
package e2e
