// Package cri dials a CRI v1 runtime (the in-process dockershim or any remote
// runtime) and returns the cri-api client interfaces the kubelet side uses.
//
// The clients are the published k8s.io/cri-client ones: every call gets its own
// deadline (Options.Timeout; RunPodSandbox twice that, StopContainer and
// ExecSync the timeout plus the grace period), messages may be 16 MiB, and
// responses are checked for missing fields. The connection is validated once
// when built: with Version for the runtime service and ImageFsInfo for the image
// service.
//
// Metrics are recorded at the gRPC layer, not by a wrapper around every method:
// cri-client installs an OpenTelemetry stats handler (otelgrpc) on its
// connection, and this package hands it a small TracerProvider whose spans, one
// per RPC and named by the gRPC method, record the upstream kubelet metrics when
// they end:
//
//	kubelet_runtime_operations_total{operation_type}
//	kubelet_runtime_operations_errors_total{operation_type}
//	kubelet_runtime_operations_duration_seconds{operation_type}
//
// operation_type uses the kubelet's names ("run_podsandbox", "list_containers",
// "image_fs_info", ...). An RPC counts as an error when its gRPC status is not
// OK; the code itself is not a label, as upstream.
//
// Only internal/app imports this package; everything below it receives the
// internalapi.RuntimeService and internalapi.ImageManagerService interfaces.
//
// Usage:
//
//	opts := cri.Options{Endpoint: "unix:///var/run/dockershim.sock", Timeout: 2 * time.Minute,
//		Registerer: prometheus.DefaultRegisterer, Logger: logger}
//	runtime, err := cri.NewRuntimeService(ctx, opts)
//	if err != nil {
//		return err // names the endpoint
//	}
//	defer runtime.Close(ctx)
//	images, err := cri.NewImageService(ctx, opts)
package cri
