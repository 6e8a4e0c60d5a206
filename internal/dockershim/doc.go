// Package dockershim implements the CRI v1 RuntimeService and ImageService over the
// Docker Engine API, with CNI pod networking. A pod sandbox is a pause container whose
// network namespace is set up through CNI; a container joins its sandbox's namespaces.
// All state is rebuilt from Docker labels and on-disk sandbox checkpoints, so the shim
// can restart at any time.
//
// Handlers return errors wrapping the sentinels of errors.go; they are turned into gRPC
// status codes once, by ErrorInterceptor, at the gRPC edge.
//
// Only internal/app and internal/dockershim/server may import this package; it never
// imports the kubelet side (internal/kubelet, internal/kuberuntime, internal/cri) or
// client-go.
//
// Usage:
//
//	svc, err := dockershim.New(dockershim.Options{DockerEndpoint: "unix:///var/run/docker.sock", ...})
//	if err != nil { ... }
//	if err := svc.Start(ctx); err != nil { ... } // waits for Docker, starts log followers and streaming
//	defer svc.Close()
//	srv, err := server.Start(ctx, server.Options{Runtime: svc, Image: svc, ...})
package dockershim
