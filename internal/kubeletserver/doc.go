// Package kubeletserver serves the kubelet's HTTP endpoints:
//
//   - the healthz endpoint (Start) on --healthz-bind-address:--healthz-port
//     (127.0.0.1:10248): /healthz only, as upstream's;
//   - the local socket (StartLocal) <root-dir>/kubelet-local.sock, mode 0600:
//     /healthz, /pods and /metrics for root on the node (a standalone node's
//     administrator), with no other authentication;
//   - the kubelet API (StartAPI) on --address:--port (0.0.0.0:10250): HTTPS,
//     every path behind APIOptions.Filter (authentication and authorization from
//     internal/kubeletserver/auth), with the upstream paths and query parameters:
//     /healthz, /pods, /runningpods/, /containerLogs/{namespace}/{pod}/{container},
//     /exec, /attach and /portForward (the runtime's streaming URL proxied, SPDY
//     and WebSocket, never redirected), /run, /checkpoint, /metrics,
//     /metrics/resource, /metrics/probes, /stats/, /configz, /debug/pprof/ and,
//     when APIOptions.LogDir is set, /logs/;
//   - the read-only server (StartReadOnly) on --read-only-port: plain HTTP, no
//     authentication, /healthz, /pods, /stats/ and the metrics only.
//
// Request paths are checked before anything is looked up: "." and ".."
// segments are refused, namespaces and container names must be DNS labels and
// pod names DNS subdomains (400); unknown pods and containers are 404.
//
// The kubelet reaches the handlers through HostInterface, which
// *kubelet.Kubelet implements. The package imports only internal/unixsock of
// this module; internal/app wires it.
//
// Usage:
//
//	srv, err := kubeletserver.StartAPI(ctx, kubeletserver.APIOptions{
//		Addr:      "0.0.0.0:10250",
//		TLSConfig: tlsConfig,   // auth.ServingTLSConfig
//		Filter:    auth.Filter, // authn -> 401, authz -> 403
//		Host:      kubelet,     // *kubelet.Kubelet
//		Health:    kubelet,
//		Stats:     stats.Handler(),
//		Gatherer:  registry,
//		Logger:    logger,
//	})
//	if err != nil {
//		return err
//	}
//	defer srv.Close() // also closed when ctx ends
package kubeletserver
