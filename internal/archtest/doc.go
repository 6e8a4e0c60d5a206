// Package archtest holds only tests: they enforce the dependency boundaries of
// DESIGN.md with `go list -deps`, so a forbidden import fails `go test ./...`
// instead of waiting for review.
//
// The rules (a package's test files count as part of the package unless
// said otherwise):
//   - nothing under internal/dockershim imports, directly or transitively,
//     internal/kubelet..., internal/kuberuntime, internal/cri or internal/app;
//   - nothing under internal/dockershim imports k8s.io/client-go, directly or
//     transitively, except in tests (client-go's exec and port-forward
//     clients are the real counterpart of the streaming server);
//   - nothing under internal/kubelet..., internal/kuberuntime or internal/cri
//     imports internal/dockershim, directly or transitively;
//   - internal/cgroupfs, the neutral leaf both halves may import, imports no
//     package of this module (outside its tests);
//   - only internal/dockershim/libdocker imports github.com/docker/docker;
//   - only internal/dockershim/network imports github.com/containernetworking/cni;
//   - nothing imports k8s.io/kubernetes.
//
// No package imports this one.
package archtest
