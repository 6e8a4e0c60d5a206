// Package archtest holds only tests: they keep docs/ARCHITECTURE.md true.
//
// TestDependencyBoundaries enforces the import rules of the package map with
// `go list -deps`, so a forbidden import fails `go test ./...` instead of
// waiting for review. The rules are boundaryRules in arch_test.go, each with
// its reason (the dockershim and the kubelet side never import each other;
// the runtime manager and the kubelet's packages meet only in
// internal/kubelet/container, and no package under internal/kubelet imports
// internal/kuberuntime; the leaves internal/procfs, internal/unixsock and
// internal/kubelet/container import nothing of the module, the cgroup layer
// internal/cgroups only internal/procfs; Docker's client
// only in internal/dockershim/libdocker, libcni only in
// internal/dockershim/network; internal/testutil only from tests; nothing
// imports k8s.io/kubernetes). A package's test files count as part of the
// package unless a rule says otherwise. TestCgroupFilesOnlyInCgroupLayer
// keeps the names of cgroup files (and the cgroup mount) inside the cgroup
// layer internal/cgroups.
//
// TestArchitectureMapComplete keeps the package map complete: every package
// of the module has exactly one row, and every row names a package.
//
// No package imports this one.
package archtest
